package cm_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

func pair(t *testing.T, seed uint64) (*fabric, *node, *node) {
	f := newFabric(t, seed)
	a := f.addNode("10.77.0.12", cm.Config{})
	b := f.addNode("10.77.0.11", cm.Config{})
	if err := b.m.Listen(service); err != nil {
		t.Fatal(err)
	}
	b.onRequest = b.accept(2, 8)
	return f, a, b
}

// established runs until both ends are established and returns the
// passive end's connection.
func established(t *testing.T, f *fabric, a, b *node, ca *cm.Conn) *cm.Conn {
	t.Helper()
	f.run(time.Hour, func() bool { return a.has(cm.EventEstablished) && b.has(cm.EventEstablished) })
	if ca.State() != cm.StateEstablished || !b.has(cm.EventEstablished) {
		t.Fatalf("not established: active %v %v, passive %v", ca.State(), a.types(), b.types())
	}
	return b.events[0].Conn
}

func TestConnect(t *testing.T) {
	f, a, b := pair(t, 1)
	pd := []byte("hello from the active side")
	ca := a.connect(b, pd)
	if ca.State() != cm.StateREQSent {
		t.Fatalf("after Connect: %v", ca.State())
	}
	cb := established(t, f, a, b, ca)
	if got := []mad.AttrID{f.sent[0].attr(), f.sent[1].attr(), f.sent[2].attr()}; len(f.sent) != 3 ||
		!slices.Equal(got, []mad.AttrID{mad.AttrREQ, mad.AttrREP, mad.AttrRTU}) {
		t.Errorf("exchange %v", f.sent)
	}
	if !bytes.HasPrefix(cb.Request().PrivateData, pd) || cb.ServiceID() != service {
		t.Errorf("request seen by the passive side: %+v", cb.Request())
	}
	if cb.RemoteID() != ca.LocalID() || ca.RemoteID() != cb.LocalID() {
		t.Errorf("comm IDs %#x/%#x %#x/%#x", ca.LocalID(), ca.RemoteID(), cb.LocalID(), cb.RemoteID())
	}
	checkAttrs(t, a, b, ca, cb)
	// Negotiation: the passive side accepted 2 responder resources and
	// initiator depth 8, against the active side's offer of 4 and 4.
	x, y := ca.Attr(), cb.Attr()
	if y.MaxDestRdAtomic != 2 || y.MaxRdAtomic != 4 || x.MaxRdAtomic != 2 || x.MaxDestRdAtomic != 4 {
		t.Errorf("READ depths: active %d/%d passive %d/%d", x.MaxRdAtomic, x.MaxDestRdAtomic, y.MaxRdAtomic, y.MaxDestRdAtomic)
	}
	if x.Timeout != 19 || y.Timeout != 19 || x.RNRRetry != 7 || y.RNRRetry != 7 || x.PathMTU != mad.MTU1024 {
		t.Errorf("timeouts and retries: %+v %+v", x, y)
	}
	for _, n := range []*node{a, b} {
		if len(n.qp.calls) != 2 || n.qp.calls[0].to != cm.QPStateRTR || n.qp.calls[1].to != cm.QPStateRTS {
			t.Errorf("%v: QP calls %+v", n.gid, n.qp.calls)
		}
	}
	// The REP went out after the passive QP was in RTS, the RTU after the
	// active one was.
	if !slices.Equal(a.types(), []cm.EventType{cm.EventEstablished}) ||
		!slices.Equal(b.types(), []cm.EventType{cm.EventConnectRequest, cm.EventEstablished}) {
		t.Errorf("events %v %v", a.types(), b.types())
	}
}

func TestReject(t *testing.T) {
	f, a, b := pair(t, 2)
	b.onRequest = func(c *cm.Conn) {
		if err := c.Reject(f.now, 0, []byte("go away")); err != nil {
			t.Fatal(err)
		}
	}
	ca := a.connect(b, nil)
	f.run(time.Hour, nil)
	if len(a.events) != 1 || a.events[0].Type != cm.EventRejected || a.events[0].Reason != mad.RejConsumerDefined ||
		!bytes.HasPrefix(a.events[0].PrivateData, []byte("go away")) {
		t.Fatalf("active events %v", a.events)
	}
	if ca.State() != cm.StateIdle || a.m.NumConns() != 0 || b.m.NumConns() != 0 {
		t.Errorf("left over: %v, %d, %d", ca.State(), a.m.NumConns(), b.m.NumConns())
	}
	if len(a.qp.calls)+len(b.qp.calls) != 0 {
		t.Errorf("QP touched: %v %v", a.qp.calls, b.qp.calls)
	}
	if b.has(cm.EventTimewaitExit) {
		t.Error("time-wait exit for a connection that never came up")
	}
}

func TestRejectNoListener(t *testing.T) {
	f, a, b := pair(t, 3)
	b.m.Unlisten(service)
	a.connect(b, nil)
	f.run(time.Hour, nil)
	if len(a.events) != 1 || a.events[0].Reason != mad.RejInvalidServiceID {
		t.Fatalf("events %v", a.events)
	}
	if b.m.NumConns() != 0 || len(b.events) != 0 {
		t.Errorf("passive side made a connection: %v", b.events)
	}
}

// TestTimeoutAfterRetries: into a black hole, the REQ goes 1 + Max CM
// Retries times, a CM response timeout plus a round trip apart, then the
// active side gives up with REJ "timeout".
func TestTimeoutAfterRetries(t *testing.T) {
	f := newFabric(t, 4)
	a := f.addNode("10.77.0.12", cm.Config{CMResponseTimeout: 16, MaxCMRetries: 3, PacketLifetime: 10, TargetACKDelay: 10})
	hole := mad.GIDFromAddr(mad.GID{}.Addr())
	c, err := a.m.Connect(f.now, &cm.ConnectParams{ServiceID: service, Dest: hole, QPN: 5, PathMTU: mad.MTU4096})
	if err != nil {
		t.Fatal(err)
	}
	f.run(time.Hour, nil)
	if f.countSent(mad.AttrREQ) != 4 || f.countSent(mad.AttrREJ) != 1 || len(f.sent) != 5 {
		t.Fatalf("sent %v", f.sent)
	}
	if rej := mad.MAD(f.sent[4].b).REJ(); rej.Reason() != mad.RejTimeout || rej.LocalCommID() != c.LocalID() || rej.ARILength() != 8 {
		t.Errorf("REJ %+v", rej.Fields())
	}
	// The active side adds its own packet lifetime twice.
	every := mad.Timeout(16) + 2*mad.Timeout(10)
	for i := 1; i < 5; i++ {
		if gap := f.sent[i].at.Sub(f.sent[i-1].at); gap != every {
			t.Errorf("gap %d: %v, want %v", i, gap, every)
		}
	}
	if !slices.Equal(a.types(), []cm.EventType{cm.EventUnreachable}) || c.State() != cm.StateIdle || a.m.NumConns() != 0 {
		t.Errorf("events %v, state %v", a.types(), c.State())
	}
	if _, ok := a.m.NextDeadline(); ok {
		t.Error("a timer still runs")
	}
}

// TestDuplicateREQBeforeAccept: the application is slow, the REQ comes
// again, and the passive side answers it with an MRA; the active side
// stops retrying and waits.
func TestDuplicateREQBeforeAccept(t *testing.T) {
	f, a, b := pair(t, 5)
	var pending *cm.Conn
	b.onRequest = func(c *cm.Conn) { pending = c }
	ca := a.connect(b, nil)
	f.run(time.Minute, func() bool { return f.countSent(mad.AttrMRA) > 0 })
	if pending == nil || pending.State() != cm.StateMRAREQSent || f.countSent(mad.AttrREQ) != 2 {
		t.Fatalf("after the repeated REQ: %v, %v", pending, f.sent)
	}
	f.run(time.Millisecond, nil)
	if ca.State() != cm.StateREPWait {
		t.Fatalf("active side after MRA: %v", ca.State())
	}
	// The MRA asked for 2^24 × 4.096 µs (a minute): no REQ in 30 s.
	f.run(30*time.Second, nil)
	if n := f.countSent(mad.AttrREQ); n != 2 {
		t.Errorf("%d REQs after the MRA", n)
	}
	b.accept(1, 1)(pending)
	established(t, f, a, b, ca)
	checkAttrs(t, a, b, ca, pending)
}

// TestDuplicateREQAfterREP: the REP is lost; the repeated REQ brings it
// again at once, before the passive side's own timer.
func TestDuplicateREQAfterREP(t *testing.T) {
	f, a, b := pair(t, 6)
	lost := false
	f.filter = func(d datagram) bool {
		if d.attr() == mad.AttrREP && !lost {
			lost = true
			return false
		}
		return true
	}
	ca := a.connect(b, nil)
	established(t, f, a, b, ca)
	if f.countSent(mad.AttrREQ) != 2 || f.countSent(mad.AttrREP) != 2 || f.countSent(mad.AttrRTU) != 1 {
		t.Errorf("sent %v", f.sent)
	}
	reqs := slices.IndexFunc(f.sent, func(d datagram) bool { return d.attr() == mad.AttrREQ && d.seq > 1 })
	if reqs < 0 || f.sent[reqs+1].attr() != mad.AttrREP || f.sent[reqs+1].at != f.sent[reqs].at.Add(f.delay) {
		t.Errorf("the second REP does not answer the second REQ: %v", f.sent)
	}
	if b.count(cm.EventConnectRequest) != 1 || b.m.Counters.Duplicates != 1 {
		t.Errorf("passive events %v, %+v", b.types(), b.m.Counters)
	}
}

// TestLostRTU: the passive side retransmits the REP, the active side
// answers the repeated REP with the RTU again.
func TestLostRTU(t *testing.T) {
	f, a, b := pair(t, 7)
	lost := false
	f.filter = func(d datagram) bool {
		if d.attr() == mad.AttrRTU && !lost {
			lost = true
			return false
		}
		return true
	}
	ca := a.connect(b, nil)
	established(t, f, a, b, ca)
	if f.countSent(mad.AttrREP) != 2 || f.countSent(mad.AttrRTU) != 2 || a.count(cm.EventEstablished) != 1 {
		t.Errorf("sent %v, events %v", f.sent, a.types())
	}
}

// TestFirstDataIsRTU: every RTU is lost, but the passive QP's first
// packet establishes the connection through the hook.
func TestFirstDataIsRTU(t *testing.T) {
	f, a, b := pair(t, 8)
	f.filter = func(d datagram) bool { return d.attr() != mad.AttrRTU }
	ca := a.connect(b, nil)
	f.run(time.Hour, func() bool { return ca.State() == cm.StateEstablished })
	cb := b.events[0].Conn
	if cb.State() != cm.StateREPSent || !cb.State().Connected() {
		t.Fatalf("passive %v", cb.State())
	}
	cb.DataReceived(f.now)
	cb.DataReceived(f.now)
	b.drain()
	if cb.State() != cm.StateEstablished || b.count(cm.EventEstablished) != 1 {
		t.Fatalf("passive %v %v", cb.State(), b.types())
	}
	if _, ok := b.m.NextDeadline(); ok {
		t.Error("the REP is still being retransmitted")
	}
}

// TestREPTimeout: the active side vanishes after the REQ; the passive
// side retries the REP Max CM Retries times, gives up with REJ, puts the
// QP in error and waits out time-wait.
func TestREPTimeout(t *testing.T) {
	f, a, b := pair(t, 9)
	ca := a.connect(b, nil)
	f.filter = func(d datagram) bool { return d.from != b.gid }
	f.run(time.Second, func() bool { return f.countSent(mad.AttrREP) > 0 })
	a.m = mustNew(t, a) // the active node restarts and forgets
	f.run(24*time.Hour, nil)
	_ = ca
	if n := f.countSent(mad.AttrREP); n != 1+cm.DefaultMaxCMRetries {
		t.Errorf("%d REPs", n)
	}
	if !slices.Equal(b.types(), []cm.EventType{cm.EventConnectRequest, cm.EventUnreachable}) || b.qp.last() != cm.QPStateError {
		t.Errorf("events %v, QP %v", b.types(), b.qp.calls)
	}
	if b.m.NumConns() != 0 {
		t.Errorf("%d connections left", b.m.NumConns())
	}
}

func mustNew(t *testing.T, n *node) *cm.Manager {
	m, err := cm.New(cm.Config{GID: n.gid, Send: sender{n}, QP: &n.qp, Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDisconnect(t *testing.T) {
	for _, who := range []string{"active", "passive", "both"} {
		t.Run(who, func(t *testing.T) {
			f, a, b := pair(t, 10)
			ca := a.connect(b, nil)
			cb := established(t, f, a, b, ca)
			switch who {
			case "active":
				if err := ca.Disconnect(f.now, []byte("bye")); err != nil {
					t.Fatal(err)
				}
			case "passive":
				if err := cb.Disconnect(f.now, nil); err != nil {
					t.Fatal(err)
				}
			case "both":
				if err := ca.Disconnect(f.now, nil); err != nil {
					t.Fatal(err)
				}
				if err := cb.Disconnect(f.now, nil); err != nil {
					t.Fatal(err)
				}
			}
			f.run(time.Hour, func() bool { return a.has(cm.EventDisconnected) && b.has(cm.EventDisconnected) })
			if ca.State() != cm.StateTimewait || cb.State() != cm.StateTimewait {
				t.Fatalf("states %v %v", ca.State(), cb.State())
			}
			if who == "active" && !bytes.HasPrefix(b.events[2].PrivateData, []byte("bye")) {
				t.Errorf("DREQ private data %q", b.events[2].PrivateData)
			}
			for _, n := range []*node{a, b} {
				if n.qp.last() != cm.QPStateError {
					t.Errorf("%v: QP %v", n.gid, n.qp.last())
				}
			}
			f.run(time.Hour, nil)
			want := []cm.EventType{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}
			if !slices.Equal(a.types(), want) || !slices.Equal(b.types()[1:], want) {
				t.Errorf("events %v %v", a.types(), b.types())
			}
			if a.m.NumConns()+b.m.NumConns() != 0 || ca.State() != cm.StateIdle {
				t.Errorf("left over %d %d", a.m.NumConns(), b.m.NumConns())
			}
			// Time-wait is the QP's local ACK timeout: 2^19 × 4.096 µs.
			if err := ca.Disconnect(f.now, nil); !errors.Is(err, cm.ErrBadState) {
				t.Errorf("second Disconnect: %v", err)
			}
		})
	}
}

// TestLostDREP: the DREQ is retransmitted and the side in time-wait
// answers it again.
func TestLostDREP(t *testing.T) {
	f, a, b := pair(t, 11)
	ca := a.connect(b, nil)
	established(t, f, a, b, ca)
	lost := false
	f.filter = func(d datagram) bool {
		if d.attr() == mad.AttrDREP && !lost {
			lost = true
			return false
		}
		return true
	}
	ca.Disconnect(f.now, nil)
	f.run(time.Hour, nil)
	if f.countSent(mad.AttrDREQ) != 2 || f.countSent(mad.AttrDREP) != 2 {
		t.Errorf("sent %v", f.sent)
	}
	if a.count(cm.EventDisconnected) != 1 || b.count(cm.EventDisconnected) != 1 {
		t.Errorf("events %v %v", a.types(), b.types())
	}
}

// TestDREQTimeout: the peer is gone; after the retries the connection
// goes to time-wait anyway.
func TestDREQTimeout(t *testing.T) {
	f, a, b := pair(t, 12)
	ca := a.connect(b, nil)
	established(t, f, a, b, ca)
	f.filter = func(datagram) bool { return false }
	ca.Disconnect(f.now, nil)
	f.run(24*time.Hour, nil)
	if f.countSent(mad.AttrDREQ) != 1+cm.DefaultMaxCMRetries {
		t.Errorf("%d DREQs", f.countSent(mad.AttrDREQ))
	}
	if !slices.Equal(a.types(), []cm.EventType{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}) {
		t.Errorf("events %v", a.types())
	}
}

// TestModifyQPFails: the active side cannot bring its QP up: it rejects
// the REP, and the passive side's QP goes to error.
func TestModifyQPFails(t *testing.T) {
	f, a, b := pair(t, 13)
	a.qp.fail = cm.QPStateRTS
	ca := a.connect(b, nil)
	f.run(time.Hour, nil)
	if len(a.events) != 1 || a.events[0].Type != cm.EventConnectError || !errors.Is(a.events[0].Err, errQP) {
		t.Fatalf("active events %v", a.events)
	}
	if ca.State() != cm.StateIdle || a.qp.last() != cm.QPStateError {
		t.Errorf("active %v, QP %v", ca.State(), a.qp.calls)
	}
	if !slices.Equal(b.types(), []cm.EventType{cm.EventConnectRequest, cm.EventRejected}) || b.qp.last() != cm.QPStateError {
		t.Errorf("passive %v, QP %v", b.types(), b.qp.calls)
	}
	// The passive side's Accept fails the same way, and the connection
	// can still be rejected.
	f2, c, d := pair(t, 14)
	d.qp.fail = cm.QPStateRTR
	d.onRequest = func(conn *cm.Conn) {
		if err := conn.Accept(f2.now, &cm.AcceptParams{QPN: 9}); !errors.Is(err, errQP) {
			t.Errorf("accept: %v", err)
		}
		if err := conn.Reject(f2.now, mad.RejNoResources, nil); err != nil {
			t.Error(err)
		}
	}
	c.connect(d, nil)
	f2.run(time.Hour, nil)
	if len(c.events) != 1 || c.events[0].Reason != mad.RejNoResources {
		t.Errorf("events %v", c.events)
	}
}

func TestBadCalls(t *testing.T) {
	f, a, b := pair(t, 15)
	for _, p := range []cm.ConnectParams{
		{QPN: 0, PathMTU: mad.MTU1024},
		{QPN: 1 << 24, PathMTU: mad.MTU1024},
		{QPN: 1, PathMTU: 0},
		{QPN: 1, PathMTU: mad.MTU1024, RetryCount: 8},
		{QPN: 1, PathMTU: mad.MTU1024, PrivateData: make([]byte, 93)},
	} {
		if _, err := a.m.Connect(f.now, &p); !errors.Is(err, cm.ErrBadParam) {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if err := b.m.Listen(service); !errors.Is(err, cm.ErrServiceInUse) {
		t.Errorf("second listen: %v", err)
	}
	if _, err := cm.New(cm.Config{}); !errors.Is(err, cm.ErrBadParam) {
		t.Errorf("New without a seam: %v", err)
	}
	ca := a.connect(b, nil)
	if err := ca.Accept(f.now, &cm.AcceptParams{QPN: 1}); !errors.Is(err, cm.ErrBadState) {
		t.Errorf("active Accept: %v", err)
	}
	if err := ca.Disconnect(f.now, nil); !errors.Is(err, cm.ErrBadState) {
		t.Errorf("Disconnect in REQ Sent: %v", err)
	}
	cb := established(t, f, a, b, ca)
	if err := cb.Accept(f.now, &cm.AcceptParams{QPN: 1}); !errors.Is(err, cm.ErrBadState) {
		t.Errorf("second Accept: %v", err)
	}
	if err := cb.Reject(f.now, 0, nil); !errors.Is(err, cm.ErrBadState) {
		t.Errorf("Reject when established: %v", err)
	}
	if err := cb.MRA(f.now, 3); !errors.Is(err, cm.ErrBadState) {
		t.Errorf("MRA when established: %v", err)
	}
}
