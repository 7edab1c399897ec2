package qp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
)

// udSide is one end of a datagram test: an engine over a pipe end with
// one UD (or GSI) QP and a region.
type udSide struct {
	l        *pipe.Link
	e        *Engine
	qp       *QP
	scq, rcq *CQ
	mem      []byte
	mr       *MR
	rx       [64]*link.Packet
}

type udPair struct {
	t    testing.TB
	now  time.Time
	a, b *udSide
}

type udConfig struct {
	a, b   netip.Addr
	faults netem.Faults
	seed   uint64
	typ    QPType
	qkey   uint32
	// skipQPs makes the sides create and keep this many RC QPs first,
	// so the UD QP gets a chosen number.
	skipQPs int
	psn     uint32
	mtu     int // link IP MTU
}

func newUDPair(t testing.TB, cfg udConfig) *udPair {
	t.Helper()
	if cfg.typ == 0 {
		cfg.typ = QPTypeUD
	}
	p := &udPair{t: t, now: time.Unix(1e6, 0)}
	la, lb := pipe.New(pipe.Config{A: cfg.a, B: cfg.b, MTU: cfg.mtu, Buffers: 1024, AtoB: cfg.faults, BtoA: cfg.faults,
		Seed: cfg.seed, Clock: func() time.Time { return p.now }})
	t.Cleanup(func() { la.Close(); lb.Close() })
	p.a, p.b = p.newSide(la, cfg), p.newSide(lb, cfg)
	return p
}

func (p *udPair) newSide(l *pipe.Link, cfg udConfig) *udSide {
	s := &udSide{l: l, e: NewEngine(l), scq: NewCQ(4096), rcq: NewCQ(4096)}
	s.e.PortMTU = 1024
	for range cfg.skipQPs {
		if _, err := s.e.CreateQP(QPConfig{SendCQ: s.scq, RecvCQ: s.rcq, MaxSendWR: 1}); err != nil {
			p.t.Fatal(err)
		}
	}
	var err error
	s.qp, err = s.e.CreateQP(QPConfig{Type: cfg.typ, PD: 1, SendCQ: s.scq, RecvCQ: s.rcq, MaxSendWR: 256, MaxRecvWR: 256,
		MaxSendSGE: 2, MaxRecvSGE: 2, MaxInline: 64})
	if err != nil {
		p.t.Fatal(err)
	}
	s.mem = make([]byte, 1<<20)
	if s.mr, err = s.e.MRs.Register(1, s.mem, memBase, AccessLocalWrite); err != nil {
		p.t.Fatal(err)
	}
	steps := []struct {
		a Attr
		m AttrMask
	}{
		{Attr{State: StateInit, QKey: cfg.qkey}, AttrState | AttrPKeyIndex | AttrPort | AttrQKey},
		{Attr{State: StateRTR}, AttrState},
		{Attr{State: StateRTS, SQPSN: cfg.psn}, AttrState | AttrSQPSN},
	}
	for _, st := range steps {
		if err := s.qp.Modify(&st.a, st.m); err != nil {
			p.t.Fatal(err)
		}
	}
	return s
}

// step delivers what each side received and runs both engines.
func (p *udPair) step() bool {
	did := false
	for _, s := range []*udSide{p.a, p.b} {
		n, _ := s.l.Recv(s.rx[:])
		if n > 0 {
			s.e.Receive(p.now, s.rx[:n])
			s.l.Release(s.rx[:n])
			did = true
		}
		s.e.Process(p.now)
	}
	return did
}

// settle runs the pair until nothing is in flight.
func (p *udPair) settle() {
	for i := 0; i < 1_000_000; i++ {
		if p.step() {
			continue
		}
		next, ok := p.a.l.Next()
		if n2, ok2 := p.b.l.Next(); ok2 && (!ok || n2.Before(next)) {
			next, ok = n2, true
		}
		if !ok {
			return
		}
		if next.After(p.now) {
			p.now = next
		} else {
			p.now = p.now.Add(time.Microsecond)
		}
		p.a.l.Advance(p.now)
		p.b.l.Advance(p.now)
	}
	p.t.Fatal("pair did not settle")
}

func (s *udSide) sge(off, n int) SGE {
	return SGE{Addr: memBase + uint64(off), Length: uint32(n), LKey: s.mr.LKey}
}

func (s *udSide) poll(c *CQ) []Completion {
	var out []Completion
	var buf [64]Completion
	for {
		n := c.Poll(buf[:])
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

func TestUDSendRecv(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b netip.Addr
	}{
		{"ipv4", netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")},
		{"ipv6", netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")},
	} {
		t.Run(fam.name, func(t *testing.T) {
			p := newUDPair(t, udConfig{a: fam.a, b: fam.b, qkey: 0x11111111, psn: 0x123})
			a, b := p.a, p.b
			if err := b.qp.PostRecv(&RecvWR{ID: 7, SGL: []SGE{b.sge(0, 40+100)}}); err != nil {
				t.Fatal(err)
			}
			msg := []byte("datagram payload of some length!")
			copy(a.mem[4096:], msg)
			ah := &AH{DGID: fam.b, TrafficClass: 0x20}
			wr := SendWR{ID: 1, Opcode: WRSendWithImm, Flags: FlagSignaled, Imm: 0xabcd, SGL: []SGE{a.sge(4096, len(msg))},
				AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111}
			if err := a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			// The send completes as its packet leaves.
			a.e.Process(p.now)
			if wcs := a.poll(a.scq); len(wcs) != 1 || wcs[0].Status != WCSuccess || wcs[0].WRID != 1 || wcs[0].ByteLen != uint32(len(msg)) {
				t.Fatalf("send completions %+v", wcs)
			}
			p.settle()
			wcs := b.poll(b.rcq)
			if len(wcs) != 1 {
				t.Fatalf("recv completions %+v", wcs)
			}
			wc := wcs[0]
			want := Completion{WRID: 7, Status: WCSuccess, Opcode: WCRecv, Flags: WCGRH | WCWithImm, ByteLen: uint32(40 + len(msg)),
				Imm: 0xabcd, QPN: b.qp.QPN(), SrcQP: a.qp.QPN(), SrcGID: fam.a}
			if wc != want {
				t.Fatalf("completion\n got %+v\nwant %+v", wc, want)
			}
			if !bytes.Equal(b.mem[40:40+len(msg)], msg) {
				t.Fatalf("payload %q", b.mem[40:40+len(msg)])
			}
			roceLen := bth.BTHLen + bth.DETHLen + 4 + len(msg) + 4
			checkGRH(t, b.mem[:40], fam.a, fam.b, 0x20, roceLen)
		})
	}
}

// checkGRH checks a received datagram's GRH as rxe writes it.
func checkGRH(t *testing.T, g []byte, src, dst netip.Addr, tos uint8, roceLen int) {
	t.Helper()
	if src.Is4() {
		if !bytes.Equal(g[:20], make([]byte, 20)) {
			t.Fatalf("IPv4 GRH: first 20 bytes % x", g[:20])
		}
		h := bth.IPv4(g[20:40])
		s4, d4 := src.As4(), dst.As4()
		if g[20] != 0x45 || h.TOS() != tos || h.TotalLength() != uint16(20+8+roceLen) || g[29] != 17 ||
			!bytes.Equal(g[32:36], s4[:]) || !bytes.Equal(g[36:40], d4[:]) || !h.ChecksumValid() {
			t.Fatalf("IPv4 GRH % x", g[20:40])
		}
		return
	}
	s16, d16 := src.As16(), dst.As16()
	if binary.BigEndian.Uint32(g) != 6<<28|uint32(tos)<<20 || binary.BigEndian.Uint16(g[4:]) != uint16(8+roceLen) || g[6] != 17 ||
		!bytes.Equal(g[8:24], s16[:]) || !bytes.Equal(g[24:40], d16[:]) {
		t.Fatalf("IPv6 GRH % x", g)
	}
}

// TestUDDrops: what UD drops, silently and counted (IBA 10.2.5, rxe's
// class D), and what fails a send.
func TestUDDrops(t *testing.T) {
	p := newUDPair(t, udConfig{qkey: 0x22})
	a, b := p.a, p.b
	ah := &AH{DGID: b.l.Info().Addr}
	send := func(id uint64, n int, qkey uint32) {
		t.Helper()
		wr := SendWR{ID: id, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{a.sge(0, n)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey}
		if err := a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
		p.settle()
	}
	// No receive WQE posted: dropped.
	send(1, 10, 0x22)
	if c := b.qp.Counters(); c.Dropped != 1 || c.CompletedRecvs != 0 {
		t.Fatalf("no WQE: %+v", c)
	}
	// Wrong Q_Key: dropped, counted as a violation.
	b.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{b.sge(0, 2000)}})
	send(2, 10, 0x23)
	if c := b.qp.Counters(); c.BadQKey != 1 || c.CompletedRecvs != 0 {
		t.Fatalf("bad qkey: %+v", c)
	}
	// The controlled-Q_Key bit sends the sender's own Q_Key (0x22).
	send(3, 10, 0x80000000)
	if c := b.qp.Counters(); c.CompletedRecvs != 1 {
		t.Fatalf("controlled qkey: %+v", c)
	}
	// A buffer without room for the GRH and the data: dropped, the WQE
	// stays for the next datagram.
	b.qp.PostRecv(&RecvWR{ID: 2, SGL: []SGE{b.sge(0, 40+9)}})
	send(4, 10, 0x22)
	if c := b.qp.Counters(); c.Dropped != 2 || c.CompletedRecvs != 1 {
		t.Fatalf("short buffer: %+v", c)
	}
	send(5, 9, 0x22)
	if c := b.qp.Counters(); c.CompletedRecvs != 2 {
		t.Fatalf("fitting datagram: %+v", c)
	}
	// Over the port MTU: a local length error, nothing sent, the QP
	// stays usable.
	tx := a.qp.Counters().TxPackets
	send(6, 1025, 0x22)
	wcs := a.poll(a.scq)
	last := wcs[len(wcs)-1]
	if last.WRID != 6 || last.Status != WCLocLenErr || a.qp.Counters().TxPackets != tx || a.qp.State() != StateRTS {
		t.Fatalf("oversize: %+v, state %s", last, a.qp.State())
	}
	// A WR an RC QP would take but a UD QP must not.
	for _, wr := range []SendWR{
		{Opcode: WRWrite, AH: ah, SGL: []SGE{a.sge(0, 1)}},
		{Opcode: WRSend, SGL: []SGE{a.sge(0, 1)}},
		{Opcode: WRSend, AH: &AH{}, SGL: []SGE{a.sge(0, 1)}},
		{Opcode: WRSend, AH: ah, RemoteQPN: 1 << 24},
	} {
		if err := a.qp.PostSend(p.now, &wr); !errors.Is(err, ErrBadWR) {
			t.Errorf("%+v: %v, want ErrBadWR", wr, err)
		}
	}
}

func TestUDModify(t *testing.T) {
	e := NewEngine(nil)
	cq := NewCQ(4)
	q, err := e.CreateQP(QPConfig{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		a    Attr
		m    AttrMask
		want error
	}{
		{"init without qkey", Attr{State: StateInit}, AttrState, ErrMissingAttr},
		{"init with AV", Attr{State: StateInit, DestAddr: netip.MustParseAddr("10.0.0.1")}, AttrState | AttrQKey | AttrAV, ErrBadAttr},
		{"init", Attr{State: StateInit, QKey: 5}, AttrState | AttrQKey, nil},
		{"rtr with path MTU", Attr{State: StateRTR, PathMTU: 1024}, AttrState | AttrPathMTU, ErrBadAttr},
		{"rtr", Attr{State: StateRTR}, AttrState, nil},
		{"rts without psn", Attr{State: StateRTS}, AttrState, ErrMissingAttr},
		{"rts", Attr{State: StateRTS, SQPSN: 9, QKey: 6}, AttrState | AttrSQPSN | AttrQKey, nil},
	} {
		err := q.Modify(&c.a, c.m)
		if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if a := q.Attr(); a.QKey != 6 || a.State != StateRTS {
		t.Fatalf("attr %+v", a)
	}
}

func TestGSIQP(t *testing.T) {
	e := NewEngine(nil)
	cq := NewCQ(4)
	g, err := e.CreateQP(QPConfig{Type: QPTypeGSI, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.QPN() != 1 || e.QP(1) != g || g.Attr().QKey != GSIQKey {
		t.Fatalf("GSI QP %d, qkey %#x", g.QPN(), g.Attr().QKey)
	}
	if _, err := e.CreateQP(QPConfig{Type: QPTypeGSI, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second GSI QP: %v", err)
	}
	rc, err := e.CreateQP(QPConfig{SendCQ: cq, RecvCQ: cq, MaxSendWR: 1})
	if err != nil || rc.QPN() != FirstQPN || rc.Config().Type != QPTypeRC {
		t.Fatalf("RC QP after GSI: %v %d", err, rc.QPN())
	}
	// The GSI QP needs no Q_Key to reach INIT: it is fixed.
	if err := g.Modify(&Attr{State: StateInit}, AttrState); err != nil {
		t.Fatal(err)
	}
	if got := e.AppendQPs(nil); len(got) != 2 || got[0] != g {
		t.Fatalf("AppendQPs %v", got)
	}
	if err := e.DestroyQP(g); err != nil || e.QP(1) != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := e.CreateQP(QPConfig{Type: QPTypeGSI, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1}); err != nil {
		t.Fatalf("GSI QP again: %v", err)
	}
}

// TestUDMatchesCapture builds datagrams with the engine as rxe sent them in
// the lab's captures (ibv_ud_pingpong's UD SEND Only to QP 0x1a, and a CM
// MAD to QP1) and compares them byte for byte, ICRC aside (it covers the
// IPv4 ID, which differs), plus the UDP source port.
func TestUDMatchesCapture(t *testing.T) {
	for _, c := range []struct {
		file string
		qpn  uint32
		typ  QPType
	}{
		{"ibv_ud_pingpong.pcap", 0x1a, QPTypeUD},
		{"rping.pcap", 1, QPTypeGSI},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := pcapfile.ReadFile("../testdata/rxe-captures/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			var fr bth.Frame
			found := false
			for _, r := range f.Records {
				if fr.Decode(r.Data) == nil && fr.Opcode() == bth.UDSendOnly && fr.BTH().DestQP() == c.qpn {
					found = true
					break
				}
			}
			if !found {
				t.Fatal("no UD packet in the capture")
			}
			ip := fr.IPv4()
			src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
			skip := 0
			if c.typ == QPTypeUD {
				skip = int(c.qpn - FirstQPN)
			}
			p := newUDPair(t, udConfig{a: src, b: dst, typ: c.typ, qkey: fr.DETH().QKey(), skipQPs: skip, psn: uint32(fr.BTH().PSN())})
			a := p.a
			if a.qp.QPN() != c.qpn {
				t.Fatalf("QPN %#x, want %#x", a.qp.QPN(), c.qpn)
			}
			pay := fr.Payload()
			copy(a.mem, pay)
			wr := SendWR{Opcode: WRSend, SGL: []SGE{a.sge(0, len(pay))}, AH: &AH{DGID: dst}, RemoteQPN: fr.BTH().DestQP(), RemoteQKey: fr.DETH().QKey()}
			if err := a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			a.e.Process(p.now)
			var rx [4]*link.Packet
			var n int
			for range 100 {
				if n, _ = p.b.l.Recv(rx[:]); n > 0 {
					break
				}
				next, _ := p.b.l.Next()
				p.now = next
				p.b.l.Advance(p.now)
			}
			if n != 1 {
				t.Fatalf("%d packets", n)
			}
			got, want := rx[0].RoCE(), fr.Packet.Bytes()
			if !bytes.Equal(got[:len(got)-4], want[:len(want)-4]) {
				t.Fatalf("packet\n got % x\nwant % x", got, want)
			}
			if sp := fr.UDP().SrcPort(); rx[0].SrcPort != sp {
				t.Fatalf("UDP source port %d, want %d", rx[0].SrcPort, sp)
			}
			p.b.l.Release(rx[:n])
		})
	}
}
