package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// udQP makes a UD QP on s, in RESET, with its own CQ.
func (s *side) udQP(t *testing.T) (*verbs.QueuePair, *verbs.CQ) {
	t.Helper()
	cq := s.dev.CreateCQ(64)
	q, err := s.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 256}})
	if err != nil {
		t.Fatal(err)
	}
	return q, cq
}

// recvOne waits for a receive completion on cq, skipping send
// completions.
func recvOne(t *testing.T, cq *verbs.CQ) verbs.WC {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]verbs.WC
	for {
		if _, err := cq.Wait(c, wc[:]); err != nil {
			t.Fatalf("waiting for a datagram: %v", err)
		}
		if wc[0].Opcode == verbs.WCRecv {
			return wc[0]
		}
	}
}

// udExchange is udaddy's exchange over a resolved UD service: the client
// sends a SEND with immediate data, its QPN, to the server's QP and Q_Key
// from the resolution; the server answers to the address and QPN of the
// completion with its own Q_Key.
func udExchange(t *testing.T, a, b *side, qa, qb *verbs.QueuePair, cqa, cqb *verbs.CQ, peer *UDPeer) {
	t.Helper()
	const grh = verbs.GRHLen
	if err := qb.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{b.mr.SGE(0, grh+256)}}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{a.mr.SGE(0, grh+256)}}); err != nil {
		t.Fatal(err)
	}
	ah, err := a.pd.CreateAH(peer.AHAttr())
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello over SIDR")
	if err := qa.PostSend(&verbs.SendWR{Opcode: verbs.WRSendWithImm, Flags: verbs.SendInline, InlineData: msg, Imm: qa.QPN(),
		AH: ah, RemoteQPN: peer.QPN, RemoteQKey: peer.QKey}); err != nil {
		t.Fatal(err)
	}
	w := recvOne(t, cqb)
	if w.Status != verbs.WCSuccess || w.Imm != qa.QPN() || w.SrcQP != qa.QPN() || w.SrcGID != a.dev.Addr() || int(w.ByteLen) != grh+len(msg) {
		t.Fatalf("server's completion %+v", w)
	}
	if got := b.mr.Buf()[grh : grh+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("server received %q", got)
	}
	back, err := b.pd.CreateAH(verbs.AHAttr{DGID: w.SrcGID, HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := qb.PostSend(&verbs.SendWR{Opcode: verbs.WRSendWithImm, Flags: verbs.SendInline, InlineData: []byte("reply"), Imm: qb.QPN(),
		AH: back, RemoteQPN: w.Imm, RemoteQKey: UDPQKey}); err != nil {
		t.Fatal(err)
	}
	if w := recvOne(t, cqa); w.Status != verbs.WCSuccess || w.SrcQP != qb.QPN() || string(a.mr.Buf()[grh:grh+5]) != "reply" {
		t.Fatalf("client's completion %+v", w)
	}
}

// resolveUD listens on b's port, dials it from a, accepts with a fresh UD
// QP, and returns both QPs and the resolution.
func resolveUD(t *testing.T, a, b *side, port uint16) (qa, qb *verbs.QueuePair, cqa, cqb *verbs.CQ, peer *UDPeer, req *UDRequest) {
	t.Helper()
	l, err := b.cm.ListenUD(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	qb, cqb = b.udQP(t)
	done := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctx(t))
		if err == nil {
			req = r
			err = r.Accept(qb, &UDParams{PrivateData: []byte("welcome")})
		}
		done <- err
	}()
	qa, cqa = a.udQP(t)
	peer, err = a.cm.DialUD(ctx(t), netip.AddrPortFrom(b.dev.Addr(), port), qa, &UDParams{PrivateData: []byte("hello"), LocalPort: 4242})
	if err != nil {
		t.Fatalf("dial UD: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("accept UD: %v", err)
	}
	return qa, qb, cqa, cqb, peer, req
}

// TestUD: DialUD finds the listener's QP, Q_Key and private data; the
// listener sees the requester's addresses and private data; both QPs are
// in RTS with librdmacm's Q_Key and carry udaddy's exchange.
func TestUD(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	qa, qb, cqa, cqb, peer, req := resolveUD(t, a, b, 7174)
	if peer.QPN != qb.QPN() || peer.QKey != UDPQKey || peer.Addr != netip.AddrPortFrom(b.dev.Addr(), 7174) ||
		!bytes.HasPrefix(peer.PrivateData, []byte("welcome")) || len(peer.PrivateData) != mad.SIDRREPPrivateDataLen {
		t.Errorf("peer %+v", peer)
	}
	if req.Remote != netip.AddrPortFrom(a.dev.Addr(), 4242) || req.Local != peer.Addr ||
		!bytes.HasPrefix(req.PrivateData, []byte("hello")) || len(req.PrivateData) != maxSIDRData {
		t.Errorf("request %+v", req)
	}
	if qa.State() != verbs.StateRTS || qb.State() != verbs.StateRTS {
		t.Errorf("QP states %v %v", qa.State(), qb.State())
	}
	reqs := h.sentOf(mad.AttrSIDRREQ)
	if len(reqs) != 1 || len(h.sentOf(mad.AttrSIDRREP)) != 1 {
		t.Fatalf("%d SIDR_REQs, %d SIDR_REPs", len(reqs), len(h.sentOf(mad.AttrSIDRREP)))
	}
	if id := reqs[0].SIDRREQ().ServiceID(); id != 0x0000000001111c06 {
		t.Errorf("service ID %#x", id)
	}
	hdr := mad.CMAHeader(reqs[0].SIDRREQ().PrivateData())
	if err := hdr.Check(); err != nil || hdr.SrcPort() != 4242 || hdr.Src() != a.dev.Addr() || hdr.Dst() != b.dev.Addr() {
		t.Errorf("rdma_cm header %+v (%v)", hdr.Fields(), err)
	}
	udExchange(t, a, b, qa, qb, cqa, cqb, peer)
	if err := req.Accept(qb, nil); !errors.Is(err, ErrBadState) {
		t.Errorf("second accept: %v", err)
	}
}

// TestUDLostREQAndREP: the first SIDR_REQ and the first SIDR_REP are
// lost; the retries resolve, and the listener sees one request.
func TestUDLostREQAndREP(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	lost := map[mad.AttrID]bool{}
	h.setFilter(func(_, _ mad.GID, m mad.MAD) int {
		attr := m.Header().AttrID()
		if (attr == mad.AttrSIDRREQ || attr == mad.AttrSIDRREP) && !lost[attr] {
			lost[attr] = true
			return 0
		}
		return 1
	})
	l, err := b.cm.ListenUD(7174)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	qb, cqb := b.udQP(t)
	go func() {
		if r, err := l.Accept(ctx(t)); err == nil {
			r.Accept(qb, nil)
		}
	}()
	qa, cqa := a.udQP(t)
	peer, err := a.cm.DialUD(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), qa, nil)
	if err != nil {
		t.Fatal(err)
	}
	if peer.QPN != qb.QPN() {
		t.Errorf("peer %+v", peer)
	}
	if n := len(h.sentOf(mad.AttrSIDRREQ)); n != 3 {
		t.Errorf("%d SIDR_REQs, want 3 (one lost, one answered by a lost SIDR_REP)", n)
	}
	if c := b.cm.Counters(); c.Duplicates != 1 {
		t.Errorf("listener's counters %+v", c)
	}
	select {
	case r := <-l.reqs:
		t.Errorf("a second request %+v", r)
	default:
	}
	udExchange(t, a, b, qa, qb, cqa, cqb, peer)
}

// TestUDRefused: nobody listens (SIDR_REP "service ID not supported",
// ErrRefused), a TCP listener on the port (status "rejected"), and the
// application's refusal with private data.
func TestUDRefused(t *testing.T) {
	a, b, _ := pipePair(t, fastCM)
	dst := netip.AddrPortFrom(b.dev.Addr(), 7174)
	_, err := a.cm.DialUD(ctx(t), dst, nil, nil)
	var se *SIDRError
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrRejected) || !errors.As(err, &se) || se.Status != mad.SIDRServiceNotSupported {
		t.Fatalf("no listener: %v", err)
	}
	tl, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.cm.DialUD(ctx(t), dst, nil, nil); !errors.Is(err, ErrRefused) {
		t.Errorf("TCP listener, UD dial: %v", err)
	}
	tl.Close()
	l, err := b.cm.ListenUD(7174)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := b.cm.ListenUD(7174); !errors.Is(err, ErrPortInUse) {
		t.Errorf("second ListenUD: %v", err)
	}
	// An RC REQ to the UD port finds no TCP listener.
	if _, err := a.cm.Dial(ctx(t), dst, a.qp(t), nil); !errors.Is(err, ErrRefused) {
		t.Errorf("RC dial to a UD listener: %v", err)
	}
	go func() {
		if r, err := l.Accept(ctx(t)); err == nil {
			r.Reject([]byte("not today"))
		}
	}()
	_, err = a.cm.DialUD(ctx(t), dst, nil, nil)
	if !errors.As(err, &se) || se.Status != mad.SIDRRejected || !bytes.HasPrefix(se.PrivateData, []byte("not today")) || errors.Is(err, ErrRefused) {
		t.Errorf("rejected: %v", err)
	}
}

// TestUDUnreachable: into a black hole, DialUD gives up after the CM's
// retries, or when its context ends first.
func TestUDUnreachable(t *testing.T) {
	a, _, _ := pipePair(t, fastCM)
	hole := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.99"), 7174)
	if _, err := a.cm.DialUD(ctx(t), hole, nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("after retries: %v", err)
	}
	slow, _, _ := pipePair(t, Config{})
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := slow.cm.DialUD(c, hole, nil, nil); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("context: %v", err)
	}
	if _, err := a.cm.DialUD(ctx(t), netip.MustParseAddrPort("[fd00::1]:1"), nil, nil); !errors.Is(err, ErrBadParam) {
		t.Errorf("other family: %v", err)
	}
	if _, err := a.cm.DialUD(ctx(t), hole, nil, &UDParams{PrivateData: make([]byte, 181)}); !errors.Is(err, ErrBadParam) {
		t.Errorf("181 bytes: %v", err)
	}
}

// TestUDListenerClose: Accept returns ErrClosed, and a request nobody
// took is rejected.
func TestUDListenerClose(t *testing.T) {
	a, b, _ := pipePair(t, fastCM)
	l, err := b.cm.ListenUD(7174)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.cm.DialUD(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), nil, nil)
		done <- err
	}()
	waitFor(t, func() bool { return len(l.reqs) == 1 })
	l.Close()
	if err := <-done; !errors.Is(err, ErrRejected) {
		t.Errorf("request left at close: %v", err)
	}
	if _, err := l.Accept(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("accept after close: %v", err)
	}
}

// TestGSIUD: the whole resolution and exchange through real UDP sockets,
// every MAD a datagram between the two devices' QP1s.
func TestGSIUD(t *testing.T) {
	a, b := udpPair(t, fastCM)
	qa, qb, cqa, cqb, peer, _ := resolveUD(t, a, b, 7174)
	udExchange(t, a, b, qa, qb, cqa, cqb, peer)
	if c := a.cm.Counters(); c.Malformed != 0 || c.SendErrors != 0 {
		t.Errorf("counters %+v", c)
	}
}
