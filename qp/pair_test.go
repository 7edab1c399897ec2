package qp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
)

// side is one end of a pair: an engine over one end of a pipe link.
type side struct {
	l        *pipe.Link
	e        *Engine
	qp       *QP
	scq, rcq *CQ
	mem      []byte
	mr       *MR
	rx       [64]*link.Packet
	wc       [64]Completion
}

// pair is two engines joined by a seeded pipe and driven by a fake clock:
// everything in a run is reproducible from the seed.
type pair struct {
	t    testing.TB
	now  time.Time
	a, b *side
}

type pairConfig struct {
	mtu      int
	faults   netem.Faults
	seed     uint64
	mem      int
	sendWR   int
	recvWR   int
	retry    uint8
	rnrRetry uint8
	rnrTimer uint8
	timeout  uint8
	rdAtomic uint8
	retrans  RetransFlags
	ackDelay time.Duration // QPConfig.AckDelay of both QPs
}

const memBase = 0x7f0000000000

func newPair(t testing.TB, cfg pairConfig) *pair {
	t.Helper()
	if cfg.mem == 0 {
		cfg.mem = 1 << 20
	}
	if cfg.sendWR == 0 {
		cfg.sendWR = 128
	}
	if cfg.recvWR == 0 {
		cfg.recvWR = 128
	}
	if cfg.timeout == 0 {
		cfg.timeout = 14 // 67 ms
	}
	if cfg.rdAtomic == 0 {
		cfg.rdAtomic = 16
	}
	p := &pair{t: t, now: time.Unix(1e6, 0)}
	la, lb := pipe.New(pipe.Config{MTU: 4200, Buffers: 1024, AtoB: cfg.faults, BtoA: cfg.faults, Seed: cfg.seed, Clock: func() time.Time { return p.now }})
	p.a, p.b = p.newSide(la, cfg), p.newSide(lb, cfg)
	p.connect(p.a, p.b, cfg, 0x100)
	p.connect(p.b, p.a, cfg, 0x200)
	t.Cleanup(p.close)
	return p
}

// close closes the pipe and lets go of both sides. A test that makes many
// pairs closes each when done with it: the cleanup that would otherwise
// keep every pair's buffers until the test ends took the race-detected
// fault tests past the machine's memory.
func (p *pair) close() {
	if p.a != nil {
		p.a.l.Close()
		p.b.l.Close()
		p.a, p.b = nil, nil
	}
}

func (p *pair) newSide(l *pipe.Link, cfg pairConfig) *side {
	s := &side{l: l, e: NewEngine(l), scq: NewCQ(4096), rcq: NewCQ(4096)}
	var err error
	s.qp, err = s.e.CreateQP(QPConfig{PD: 1, SendCQ: s.scq, RecvCQ: s.rcq, MaxSendWR: cfg.sendWR, MaxRecvWR: cfg.recvWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 256, AckDelay: cfg.ackDelay})
	if err != nil {
		p.t.Fatal(err)
	}
	s.mem = make([]byte, cfg.mem)
	s.mr, err = s.e.MRs.Register(1, s.mem, memBase, accessAll)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// extraQP makes and connects another QP pair on p's engines, of one SGE,
// MaxSendWR send WRs and MaxInline inline bytes on the requester's side.
func (p *pair) extraQP(sendWR, inline int) (x, y *QP) {
	p.t.Helper()
	x, err := p.a.e.CreateQP(QPConfig{PD: 1, SendCQ: p.a.scq, RecvCQ: p.a.rcq, MaxSendWR: sendWR, MaxRecvWR: 1, MaxInline: inline})
	if err != nil {
		p.t.Fatal(err)
	}
	y, err = p.b.e.CreateQP(QPConfig{PD: 1, SendCQ: p.b.scq, RecvCQ: p.b.rcq, MaxSendWR: sendWR, MaxRecvWR: 1})
	if err != nil {
		p.t.Fatal(err)
	}
	sa, sb := &side{l: p.a.l, e: p.a.e, qp: x}, &side{l: p.b.l, e: p.b.e, qp: y}
	cfg := pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, timeout: 14, rdAtomic: 1}
	p.connect(sa, sb, cfg, 0x100)
	p.connect(sb, sa, cfg, 0x200)
	return x, y
}

func (p *pair) connect(s, peer *side, cfg pairConfig, psn uint32) {
	p.t.Helper()
	// PSNs start near the wrap so long runs cross it.
	sq := (0xffffff - 3000 + psn) & 0xffffff
	rq := (0xffffff - 3000 + (0x300 - psn)) & 0xffffff
	steps := []struct {
		a Attr
		m AttrMask
	}{
		{Attr{State: StateInit, AccessFlags: accessAll}, AttrState | AttrAccessFlags | AttrPKeyIndex | AttrPort},
		{Attr{State: StateRTR, DestAddr: peer.l.Info().Addr, PathMTU: cfg.mtu, DestQPN: peer.qp.QPN(), RQPSN: rq, MaxDestRdAtomic: cfg.rdAtomic, MinRNRTimer: cfg.rnrTimer, Retrans: cfg.retrans},
			AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer | AttrRetrans},
		{Attr{State: StateRTS, Timeout: cfg.timeout, RetryCnt: cfg.retry, RNRRetry: cfg.rnrRetry, SQPSN: sq, MaxRdAtomic: cfg.rdAtomic, Retrans: cfg.retrans},
			AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic | AttrRetrans},
	}
	for _, st := range steps {
		if err := s.qp.Modify(&st.a, st.m); err != nil {
			p.t.Fatal(err)
		}
	}
}

// step receives and processes on both sides; it reports whether anything
// moved.
func (p *pair) step() bool {
	did := false
	for _, s := range []*side{p.a, p.b} {
		// receive's work, inline: a call here would add to every
		// benchmark's message what no engine does.
		n, _ := s.l.Recv(s.rx[:])
		if n > 0 {
			s.e.Receive(p.now, s.rx[:n])
			s.l.Release(s.rx[:n])
			did = true
		}
		s.e.Process(p.now)
		if s.e.Busy() {
			did = true
		}
	}
	return did
}

// receive hands the side's engine what its link holds: one step of
// step, for BenchmarkMessagePhases.
func (s *side) receive(now time.Time) {
	if n, _ := s.l.Recv(s.rx[:]); n > 0 {
		s.e.Receive(now, s.rx[:n])
		s.l.Release(s.rx[:n])
	}
}

// advance jumps the clock to the next packet or timer; false when nothing
// is pending at all.
func (p *pair) advance() bool {
	var next time.Time
	found := false
	consider := func(t time.Time, ok bool) {
		if ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	for _, s := range []*side{p.a, p.b} {
		consider(s.l.Next())
		consider(s.e.NextDeadline())
	}
	if !found {
		return false
	}
	if next.After(p.now) {
		p.now = next
	} else {
		p.now = p.now.Add(time.Microsecond)
	}
	p.a.l.Advance(p.now)
	p.b.l.Advance(p.now)
	return true
}

// run drives the pair until done reports true; it fails the test if the
// pair goes quiet first or takes too many steps.
func (p *pair) run(done func() bool) {
	p.t.Helper()
	for i := 0; i < 50_000_000; i++ {
		if done() {
			return
		}
		if !p.step() && !p.advance() {
			if done() {
				return
			}
			p.t.Fatalf("pair went quiet: a %+v / b %+v", p.a.e.Stats(), p.b.e.Stats())
		}
	}
	p.t.Fatal("pair did not finish")
}

// memSGE returns an SGE for [off, off+n) of the side's region.
func (s *side) sge(off, n int) SGE {
	return SGE{Addr: memBase + uint64(off), Length: uint32(n), LKey: s.mr.LKey}
}

var _ = netip.Addr{}
