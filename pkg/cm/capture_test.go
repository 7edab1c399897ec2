package cm_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// rpingMADs returns the five CM MADs of rping.pcap: REQ, REP, RTU, DREQ,
// DREP.
func rpingMADs(t *testing.T) [][]byte {
	t.Helper()
	f, err := pcapfile.ReadFile("../../testdata/rxe-captures/rping.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range f.Records {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil || fr.Opcode() != bth.UDSendOnly || fr.BTH().DestQP() != mad.GSIQPN {
			continue
		}
		out = append(out, fr.Payload())
	}
	if len(out) != 5 {
		t.Fatalf("%d CM MADs in rping.pcap", len(out))
	}
	return out
}

// TestCapturePSNs pins down what a Starting PSN is from the RC packets of
// the same capture: the client's first SEND carries the REP's Starting
// PSN and the server's first READ request the REQ's, so each side's
// Starting PSN is the PSN it receives first (ib_cm sets the active side's
// sq_psn from the REP and the passive side's from the REQ).
func TestCapturePSNs(t *testing.T) {
	caps := rpingMADs(t)
	reqPSN, repPSN := mad.MAD(caps[0]).REQ().StartingPSN(), mad.MAD(caps[1]).REP().StartingPSN()
	f, err := pcapfile.ReadFile("../../testdata/rxe-captures/rping.pcap")
	if err != nil {
		t.Fatal(err)
	}
	first := map[bth.Opcode]uint32{}
	for _, r := range f.Records {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil {
			continue
		}
		if _, ok := first[fr.Opcode()]; !ok {
			first[fr.Opcode()] = uint32(fr.BTH().PSN())
		}
	}
	if first[bth.RCSendOnly] != repPSN || first[bth.RCReadRequest] != reqPSN {
		t.Errorf("first SEND PSN %#x, first READ PSN %#x; REQ's Starting PSN %#x, REP's %#x", first[bth.RCSendOnly], first[bth.RCReadRequest], reqPSN, repPSN)
	}
}

var (
	g1 = mad.GIDFromAddr(netip.MustParseAddr("10.77.0.11")) // rping server
	g2 = mad.GIDFromAddr(netip.MustParseAddr("10.77.0.12")) // rping client
)

// capNode is a manager whose sends are recorded.
type capNode struct {
	m    *cm.Manager
	qp   fakeQP
	sent [][]byte
}

func (n *capNode) SendMAD(dst cm.Address, b []byte) error {
	n.sent = append(n.sent, bytes.Clone(b))
	return nil
}

func newCapNode(t *testing.T, gid mad.GID, guid uint64) *capNode {
	n := &capNode{}
	m, err := cm.New(cm.Config{GID: gid, CAGUID: guid, Send: n, QP: &n.qp, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	return n
}

// patch returns a copy of a captured MAD with its TID and communication
// IDs replaced (0 leaves one alone).
func patch(b []byte, tid uint64, local, remote uint32) []byte {
	b = bytes.Clone(b)
	if tid != 0 {
		binary.BigEndian.PutUint64(b[8:], tid)
	}
	if local != 0 {
		binary.BigEndian.PutUint32(b[mad.HeaderLen:], local)
	}
	if remote != 0 {
		binary.BigEndian.PutUint32(b[mad.HeaderLen+4:], remote)
	}
	return b
}

func diff(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s differs from the capture first at byte %d (data %d): got %#02x want %#02x\n got %x\nwant %x",
					what, i, i-mad.HeaderLen, got[i], want[i], got, want)
				return
			}
		}
	}
}

// TestCapturePassive plays the rping server: the client's real REQ goes
// into a passive manager, which answers with a REP that is the kernel's,
// byte for byte, but for our own communication ID; the captured RTU
// establishes the connection and the captured DREQ gets the captured DREP.
func TestCapturePassive(t *testing.T) {
	caps := rpingMADs(t)
	capREQ, capREP, capRTU, capDREQ, capDREP := caps[0], caps[1], caps[2], caps[3], caps[4]
	now := epoch
	n := newCapNode(t, g1, 0x505400fffe77000b)
	n.m.Listen(mad.IPServiceID(mad.PortSpaceTCP, 7174))
	client := cm.Address{GID: g2, QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
	if err := n.m.HandleMAD(now, client, capREQ); err != nil {
		t.Fatal(err)
	}
	ev := n.m.PollEvents(nil)
	if len(ev) != 1 || ev[0].Type != cm.EventConnectRequest {
		t.Fatalf("events %v", ev)
	}
	c := ev[0].Conn
	req := c.Request()
	if req.LocalQPN != 0x1b || req.StartingPSN != 0x1fe01b || req.PathMTU != mad.MTU1024 || c.RemoteID() != 0xaed0508f {
		t.Errorf("request %+v", req)
	}
	h := mad.CMAHeader(req.PrivateData)
	if h.Check() != nil || h.Src() != netip.MustParseAddr("10.77.0.12") || h.SrcPort() != 0xc33d {
		t.Errorf("rdma_cm header %+v", h.Fields())
	}
	// rping's server accepts with its QP 0x1b, PSN 0x5fc562, one READ
	// each way; rdma_cm's default RNR retry count is 7.
	err := c.Accept(now, &cm.AcceptParams{QPN: 0x1b, StartingPSN: 0x5fc562, ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.sent) != 1 {
		t.Fatalf("sent %d", len(n.sent))
	}
	diff(t, "REP", patch(n.sent[0], 0, 0x01bce9b5, 0), capREP)
	a := c.Attr()
	want := cm.QPAttr{
		QPN: 0x1b, DestQPN: 0x1b, SQPSN: 0x1fe01b, RQPSN: 0x5fc562, PathMTU: mad.MTU1024, PKey: 0xffff,
		DestGID: g2, SrcGID: g1, FlowLabel: 0x7c069, HopLimit: 64,
		Timeout: 19, RetryCount: 7, RNRRetry: 7, MaxRdAtomic: 1, MaxDestRdAtomic: 1,
	}
	if a != want {
		t.Errorf("QP attributes\n got %+v\nwant %+v", a, want)
	}
	if len(n.qp.calls) != 2 || n.qp.calls[1].to != cm.QPStateRTS {
		t.Errorf("QP calls %v", n.qp.calls)
	}

	if err := n.m.HandleMAD(now, client, patch(capRTU, 0, 0, c.LocalID())); err != nil {
		t.Fatal(err)
	}
	if c.State() != cm.StateEstablished {
		t.Fatalf("after RTU: %v", c.State())
	}
	if err := n.m.HandleMAD(now, client, patch(capDREQ, 0, 0, c.LocalID())); err != nil {
		t.Fatal(err)
	}
	if len(n.sent) != 2 {
		t.Fatalf("sent %d", len(n.sent))
	}
	diff(t, "DREP", patch(n.sent[1], 0, 0x01bce9b5, 0), capDREP)
	ev = n.m.PollEvents(nil)
	if len(ev) != 2 || ev[0].Type != cm.EventEstablished || ev[1].Type != cm.EventDisconnected || c.State() != cm.StateTimewait {
		t.Errorf("events %v, state %v", ev, c.State())
	}
}

// TestCaptureActive plays the rping client: with rping's parameters the
// REQ we send is the kernel's byte for byte, but for our communication ID
// and TID; the captured REP (addressed to us) brings the captured RTU.
func TestCaptureActive(t *testing.T) {
	caps := rpingMADs(t)
	capREQ, capREP, capRTU, capDREQ := caps[0], caps[1], caps[2], caps[3]
	now := epoch
	n := newCapNode(t, g2, 0x505400fffe77000c)
	pd := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(pd).Encode(&mad.CMAHeaderFields{IPVersion: 4, SrcPort: 0xc33d, Src: g2.Addr().Unmap(), Dst: g1.Addr().Unmap()})
	c, err := n.m.Connect(now, &cm.ConnectParams{
		ServiceID: mad.IPServiceID(mad.PortSpaceTCP, 7174), Dest: g1,
		QPN: 0x1b, StartingPSN: 0x1fe01b, PathMTU: mad.MTU1024,
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
		FlowLabel: 0x7c069, PrivateData: pd,
	})
	if err != nil {
		t.Fatal(err)
	}
	tid := mad.MAD(n.sent[0]).Header().TID()
	diff(t, "REQ", n.sent[0], patch(capREQ, tid, c.LocalID(), 0))
	server := cm.Address{GID: g1, QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
	if err := n.m.HandleMAD(now.Add(time.Millisecond), server, patch(capREP, tid, 0, c.LocalID())); err != nil {
		t.Fatal(err)
	}
	if c.State() != cm.StateEstablished || len(n.sent) != 2 {
		t.Fatalf("after REP: %v, sent %d", c.State(), len(n.sent))
	}
	diff(t, "RTU", n.sent[1], patch(capRTU, tid, c.LocalID(), 0))
	a := c.Attr()
	if a.DestQPN != 0x1b || a.SQPSN != 0x5fc562 || a.RQPSN != 0x1fe01b || a.Timeout != 19 || a.RNRRetry != 7 || a.DestGID != g1 {
		t.Errorf("QP attributes %+v", a)
	}
	if err := c.Disconnect(now, nil); err != nil {
		t.Fatal(err)
	}
	diff(t, "DREQ", n.sent[2], patch(capDREQ, tid, c.LocalID(), 0))
}
