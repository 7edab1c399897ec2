package qp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// fakePort is a Port that keeps what the engine sends, for GetPacket.
type fakePort struct {
	sent  []*link.Packet
	free  int // buffers left; negative means unlimited
	size  int
	alloc int
}

func (f *fakePort) Alloc(pkts []*link.Packet) int {
	n := 0
	for i := range pkts {
		if f.free == 0 {
			break
		}
		if f.free > 0 {
			f.free--
		}
		pkts[i] = &link.Packet{Buf: make([]byte, link.Headroom+f.size), Off: link.Headroom}
		n++
		f.alloc++
	}
	return n
}

func (f *fakePort) Send(pkts []*link.Packet) (int, error) {
	f.sent = append(f.sent, pkts...)
	return len(pkts), nil
}

// Release takes back buffers the engine did not send (those it took in a
// batch and did not use), so a finite free count stays true.
func (f *fakePort) Release(pkts []*link.Packet) {
	for i, p := range pkts {
		if p == nil {
			continue
		}
		if f.free >= 0 {
			f.free++
		}
		f.alloc--
		pkts[i] = nil
	}
}

// Context drives one engine with one RTS QP by hand, as gVisor's
// tcp/testing/context does: the test plays the peer with SendPacket and
// reads the engine's answers with GetPacket.
type Context struct {
	t    testing.TB
	Port *fakePort
	E    *Engine
	QP   *QP
	SCQ  *CQ
	RCQ  *CQ
	Now  time.Time
	Mem  []byte
	MR   *MR
	// PeerQPN is the QPN the test plays; PeerPSN the next PSN it sends.
	PeerQPN uint32
	PeerPSN bth.PSN
	pkt     bth.Packet
	// burst, when not nil, collects what SendPacket sends, for
	// ReceiveBurst to deliver in one Receive.
	burst []*link.Packet
	// Src and Dst, when set, are the IP source and destination
	// SendPacket's packets carry; Src defaults to the QP's peer.
	Src, Dst netip.Addr
}

const (
	ctxMTU     = 1024
	ctxMemBase = 0x10000
	ctxSQPSN   = 0xfffff0 // near the wrap, so tests cross it
	ctxRQPSN   = 0xfffffa
)

var ctxPeer = netip.MustParseAddr("10.0.0.2")

// New returns a Context whose QP is in RTS with path MTU 1024, remote
// read, write and atomic access, a 64 KiB region at ctxMemBase and four
// posted receives of 4 KiB each into it.
func New(t testing.TB) *Context {
	t.Helper()
	return NewRetrans(t, 0)
}

// NewRetrans is New with the QP's retransmission flags (RetransSelective
// for selective repeat), set from RTR on.
func NewRetrans(t testing.TB, retrans RetransFlags) *Context {
	t.Helper()
	c := &Context{t: t, Port: &fakePort{free: -1, size: 4200}, Now: time.Unix(1000, 0), PeerQPN: 0x123, PeerPSN: ctxRQPSN}
	c.E = NewEngine(c.Port)
	c.SCQ, c.RCQ = NewCQ(256), NewCQ(256)
	q, err := c.E.CreateQP(QPConfig{PD: 1, SendCQ: c.SCQ, RecvCQ: c.RCQ, MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 64})
	if err != nil {
		t.Fatal(err)
	}
	c.QP = q
	c.Mem = make([]byte, 64<<10)
	c.MR, err = c.E.MRs.Register(1, c.Mem, ctxMemBase, accessAll)
	if err != nil {
		t.Fatal(err)
	}
	c.modify(&Attr{State: StateInit, AccessFlags: accessAll}, AttrState|AttrAccessFlags|AttrPKeyIndex|AttrPort)
	c.modify(&Attr{State: StateRTR, DestAddr: ctxPeer, PathMTU: ctxMTU, DestQPN: c.PeerQPN, RQPSN: ctxRQPSN, MaxDestRdAtomic: 4, MinRNRTimer: 12, Retrans: retrans},
		AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer|AttrRetrans)
	c.modify(&Attr{State: StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: ctxSQPSN, MaxRdAtomic: 4, Retrans: retrans},
		AttrState|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrSQPSN|AttrMaxQPRdAtomic|AttrRetrans)
	for i := range 4 {
		c.PostRecv(uint64(100+i), SGE{Addr: ctxMemBase + 0x8000 + uint64(i)*4096, Length: 4096, LKey: c.MR.LKey})
	}
	return c
}

// Cleanup checks the engine sent nothing the test did not read.
func (c *Context) Cleanup() {
	c.t.Helper()
	if len(c.Port.sent) != 0 {
		c.t.Errorf("%d unread packets, first %v", len(c.Port.sent), c.Port.sent[0].RoCE()[0])
	}
}

func (c *Context) modify(a *Attr, m AttrMask) {
	c.t.Helper()
	if err := c.QP.Modify(a, m); err != nil {
		c.t.Fatal(err)
	}
}

// PostRecv posts a receive WR.
func (c *Context) PostRecv(id uint64, sgl ...SGE) {
	c.t.Helper()
	if err := c.QP.PostRecv(&RecvWR{ID: id, SGL: sgl}); err != nil {
		c.t.Fatal(err)
	}
}

// PostSend posts a send WR and runs the requester.
func (c *Context) PostSend(wr *SendWR) {
	c.t.Helper()
	if err := c.QP.PostSend(c.Now, wr); err != nil {
		c.t.Fatal(err)
	}
	c.E.Process(c.Now)
}

// SendPacket delivers a packet from the peer: f's BTH gets the QP's number
// and P_Key unless set.
func (c *Context) SendPacket(f *bth.PacketFields, payload []byte) {
	c.t.Helper()
	if f.BTH.DestQP == 0 {
		f.BTH.DestQP = c.QP.QPN()
	}
	if f.BTH.PKey == 0 {
		f.BTH.PKey = 0xffff
	}
	buf := make([]byte, link.Headroom+bth.PacketLen(f.BTH.Opcode, len(payload)))
	n, err := f.Encode(buf[link.Headroom:], payload)
	if err != nil {
		c.t.Fatal(err)
	}
	lp := &link.Packet{Buf: buf, Off: link.Headroom, Len: n, Remote: ctxPeer, Local: c.Dst}
	if c.Src.IsValid() {
		lp.Remote = c.Src
	}
	if c.burst != nil {
		c.burst = append(c.burst, lp)
		return
	}
	c.E.Receive(c.Now, []*link.Packet{lp})
}

// HoldBurst makes SendPacket collect packets until ReceiveBurst.
func (c *Context) HoldBurst() { c.burst = []*link.Packet{} }

// ReceiveBurst delivers the packets held since HoldBurst in one Receive, as
// a link's Recv hands over a batch.
func (c *Context) ReceiveBurst() {
	b := c.burst
	c.burst = nil
	c.E.Receive(c.Now, b)
}

// SendRequest sends a request at the peer's next PSN and advances it.
func (c *Context) SendRequest(op bth.Opcode, f *bth.PacketFields, payload []byte, ackReq bool) {
	c.t.Helper()
	if f == nil {
		f = &bth.PacketFields{}
	}
	f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = op, c.PeerPSN, ackReq
	c.SendPacket(f, payload)
	c.PeerPSN = c.PeerPSN.Next()
}

// GetPacket returns the next packet the engine sent, decoded; it fails the
// test when there is none.
func (c *Context) GetPacket() *bth.Packet {
	c.t.Helper()
	if len(c.Port.sent) == 0 {
		c.t.Fatal("no packet sent")
	}
	lp := c.Port.sent[0]
	c.Port.sent = c.Port.sent[1:]
	p := new(bth.Packet)
	if err := p.Decode(lp.RoCE()); err != nil {
		c.t.Fatalf("engine sent an undecodable packet: %v", err)
	}
	if lp.Remote != ctxPeer || lp.SrcPort != bth.SrcPortForFlow(bth.FlowLabel(c.QP.QPN(), c.PeerQPN)) {
		c.t.Errorf("packet to %v from port %#x", lp.Remote, lp.SrcPort)
	}
	if h := p.BTH(); h.DestQP() != c.PeerQPN || h.PKey() != 0xffff {
		c.t.Errorf("packet to QPN %#x P_Key %#x", h.DestQP(), h.PKey())
	}
	return p
}

// CheckNoPacket fails if the engine sent anything.
func (c *Context) CheckNoPacket() {
	c.t.Helper()
	if n := len(c.Port.sent); n != 0 {
		p := c.GetPacket()
		c.t.Fatalf("%d unexpected packets, first %v PSN %#x", n, p.Opcode(), p.BTH().PSN())
	}
}

// Checkers, composable like gVisor's checker package.
type checker func(testing.TB, *bth.Packet)

func (c *Context) Expect(cs ...checker) *bth.Packet {
	c.t.Helper()
	p := c.GetPacket()
	for _, f := range cs {
		f(c.t, p)
	}
	return p
}

func opcodeIs(o bth.Opcode) checker {
	return func(t testing.TB, p *bth.Packet) {
		t.Helper()
		if p.Opcode() != o {
			t.Errorf("opcode %v, want %v", p.Opcode(), o)
		}
	}
}

func psnIs(psn bth.PSN) checker {
	return func(t testing.TB, p *bth.Packet) {
		t.Helper()
		if got := p.BTH().PSN(); got != psn {
			t.Errorf("PSN %#x, want %#x", got, psn)
		}
	}
}

func ackReqIs(v bool) checker {
	return func(t testing.TB, p *bth.Packet) {
		t.Helper()
		if p.BTH().AckReq() != v {
			t.Errorf("AckReq %v, want %v", p.BTH().AckReq(), v)
		}
	}
}

func aethIs(syn bth.Syndrome, msn uint32) checker {
	return func(t testing.TB, p *bth.Packet) {
		t.Helper()
		a := p.AETH()
		if a == nil {
			t.Errorf("%v has no AETH", p.Opcode())
			return
		}
		if a.Syndrome() != syn || a.MSN() != msn {
			t.Errorf("AETH %v MSN %d, want %v MSN %d", a.Syndrome(), a.MSN(), syn, msn)
		}
	}
}

func payloadLen(n int) checker {
	return func(t testing.TB, p *bth.Packet) {
		t.Helper()
		if len(p.Payload()) != n {
			t.Errorf("payload %d bytes, want %d", len(p.Payload()), n)
		}
		if p.PadCnt() != -n&3 {
			t.Errorf("pad %d for %d bytes", p.PadCnt(), n)
		}
	}
}

// PollOne returns the one completion waiting on cq.
func (c *Context) PollOne(cq *CQ) Completion {
	c.t.Helper()
	var wc [2]Completion
	n := cq.Poll(wc[:])
	if n != 1 {
		c.t.Fatalf("%d completions, want 1: %+v", n, wc[:n])
	}
	return wc[0]
}

// Advance moves the clock and runs timers.
func (c *Context) Advance(d time.Duration) {
	c.Now = c.Now.Add(d)
	c.E.Process(c.Now)
}

var ack = bth.ACK(bth.CreditsInvalid)
