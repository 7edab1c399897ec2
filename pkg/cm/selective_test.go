package cm_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// TestSelectiveRepeat: selective repeat is on at both ends exactly when
// the REQ offers it and the passive side takes it, and the QPs go to RTR
// with it; either side saying no leaves both REQ and REP as ib_cm sends
// them.
func TestSelectiveRepeat(t *testing.T) {
	for _, tc := range []struct{ offer, take bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		f, a, b := pair(t, 11)
		b.onRequest = func(c *cm.Conn) {
			if got := c.Request().UroceCaps; got != caps(tc.offer) {
				t.Errorf("%+v: REQ offers %#x", tc, got)
			}
			err := c.Accept(f.now, &cm.AcceptParams{QPN: b.qpn, StartingPSN: b.psn, ResponderResources: 1, InitiatorDepth: 1,
				RNRRetryCount: 7, SelectiveRepeat: tc.take})
			if err != nil {
				t.Errorf("accept: %v", err)
			}
		}
		ca, err := a.m.Connect(f.now, &cm.ConnectParams{ServiceID: service, Dest: b.gid, QPN: a.qpn, StartingPSN: a.psn,
			PathMTU: mad.MTU1024, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
			SelectiveRepeat: tc.offer})
		if err != nil {
			t.Fatal(err)
		}
		cb := established(t, f, a, b, ca)
		on := tc.offer && tc.take
		for _, n := range []*node{a, b} {
			if len(n.qp.calls) != 2 || n.qp.calls[0].to != cm.QPStateRTR || n.qp.calls[0].attr.SelectiveRepeat != on {
				t.Errorf("%+v: %v: QP calls %+v", tc, n.gid, n.qp.calls)
			}
		}
		if ca.Attr().SelectiveRepeat != on || cb.Attr().SelectiveRepeat != on {
			t.Errorf("%+v: selective repeat active %v passive %v, want %v", tc, ca.Attr().SelectiveRepeat, cb.Attr().SelectiveRepeat, on)
		}
		req, rep := mad.MAD(f.sent[0].b).Data(), mad.MAD(f.sent[1].b).Data()
		if w := req[24:28]; !tc.offer && w[0]|w[1]|w[2]|w[3] != 0 {
			t.Errorf("%+v: REQ reserved word %x", tc, w)
		}
		if got := rep[27] & 0x0f; got != uint8(caps(on)) {
			t.Errorf("%+v: REP byte 27 low bits %#x", tc, got)
		}
	}
}

func caps(on bool) mad.Caps {
	if on {
		return mad.CapSelectiveRepeat
	}
	return 0
}

// TestSelectiveRepeatUC: a UC REQ gets no selective repeat, offered or
// not: it is RC's.
func TestSelectiveRepeatUC(t *testing.T) {
	f := newFabric(t, 12)
	b := f.addNode("10.77.0.11", cm.Config{})
	if err := b.m.Listen(service); err != nil {
		t.Fatal(err)
	}
	var buf [mad.Size]byte
	m := mad.NewCM(buf[:], mad.AttrREQ, 1)
	m.REQ().Encode(&mad.REQFields{LocalCommID: 9, ServiceID: service, LocalQPN: 0x33, TransportService: mad.ServiceUC,
		PathMTU: mad.MTU1024, PKey: 0xffff, MaxCMRetries: 3, UroceCaps: mad.CapSelectiveRepeat,
		Primary: mad.Path{LocalGID: g2, RemoteGID: b.gid, HopLimit: 64, LocalACKTimeout: 19}})
	if err := b.m.HandleMAD(f.now, cm.Address{GID: g2, QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}, buf[:]); err != nil {
		t.Fatal(err)
	}
	ev := b.m.PollEvents(nil)
	if len(ev) != 1 || ev[0].Type != cm.EventConnectRequest {
		t.Fatalf("events %v", ev)
	}
	if err := ev[0].Conn.Accept(f.now, &cm.AcceptParams{QPN: b.qpn, StartingPSN: b.psn, SelectiveRepeat: true}); err != nil {
		t.Fatal(err)
	}
	if ev[0].Conn.Attr().SelectiveRepeat {
		t.Error("UC connection with selective repeat")
	}
	if rep := mad.MAD(f.sent[len(f.sent)-1].b); rep.Header().AttrID() != mad.AttrREP || rep.REP().UroceCaps() != 0 {
		t.Errorf("answer %v with Caps %#x", rep.Header().AttrID(), rep.REP().UroceCaps())
	}
}

// TestCaptureNoSelectiveRepeat: with rping's REQ, which carries no Caps,
// a passive side that would take selective repeat answers with the
// kernel's REP byte for byte and leaves it off; an active side that
// offers it, answered by the kernel's REP, leaves it off too, and its REQ
// differs from the kernel's only in the reserved word.
func TestCaptureNoSelectiveRepeat(t *testing.T) {
	caps := rpingMADs(t)
	capREQ, capREP := caps[0], caps[1]
	now := epoch

	p := newCapNode(t, g1, 0x505400fffe77000b)
	p.m.Listen(mad.IPServiceID(mad.PortSpaceTCP, 7174))
	client := cm.Address{GID: g2, QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
	if err := p.m.HandleMAD(now, client, capREQ); err != nil {
		t.Fatal(err)
	}
	ev := p.m.PollEvents(nil)
	if len(ev) != 1 || ev[0].Type != cm.EventConnectRequest {
		t.Fatalf("events %v", ev)
	}
	c := ev[0].Conn
	if c.Request().UroceCaps != 0 {
		t.Errorf("rping's REQ offers %#x", c.Request().UroceCaps)
	}
	err := c.Accept(now, &cm.AcceptParams{QPN: 0x1b, StartingPSN: 0x5fc562, ResponderResources: 1, InitiatorDepth: 1,
		RNRRetryCount: 7, SelectiveRepeat: true})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "REP", patch(p.sent[0], 0, 0x01bce9b5, 0), capREP)
	if c.Attr().SelectiveRepeat || p.qp.calls[0].attr.SelectiveRepeat {
		t.Error("passive side: selective repeat on with rping")
	}

	a := newCapNode(t, g2, 0x505400fffe77000c)
	pd := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(pd).Encode(&mad.CMAHeaderFields{IPVersion: 4, SrcPort: 0xc33d, Src: g2.Addr().Unmap(), Dst: g1.Addr().Unmap()})
	ca, err := a.m.Connect(now, &cm.ConnectParams{
		ServiceID: mad.IPServiceID(mad.PortSpaceTCP, 7174), Dest: g1,
		QPN: 0x1b, StartingPSN: 0x1fe01b, PathMTU: mad.MTU1024,
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
		FlowLabel: 0x7c069, PrivateData: pd, SelectiveRepeat: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	tid := mad.MAD(a.sent[0]).Header().TID()
	want := patch(capREQ, tid, ca.LocalID(), 0)
	copy(want[mad.HeaderLen+24:], []byte{'u', 'R', 0, byte(mad.CapSelectiveRepeat)})
	diff(t, "REQ", a.sent[0], want)
	server := cm.Address{GID: g1, QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
	if err := a.m.HandleMAD(now.Add(time.Millisecond), server, patch(capREP, tid, 0, ca.LocalID())); err != nil {
		t.Fatal(err)
	}
	if ca.State() != cm.StateEstablished {
		t.Fatalf("after REP: %v", ca.State())
	}
	if ca.Attr().SelectiveRepeat || a.qp.calls[0].attr.SelectiveRepeat {
		t.Error("active side: selective repeat on with rping's REP")
	}
}
