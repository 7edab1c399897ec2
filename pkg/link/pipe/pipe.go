package pipe

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/pool"
	"github.com/uroce/uroce/pkg/netem"
)

var _ link.Link = (*Link)(nil)
var _ link.Waker = (*Link)(nil)

// ErrNotPeer is returned (wrapped with link.ErrNoRoute) when a packet is
// addressed to anyone but the pipe's other end.
var ErrNotPeer = fmt.Errorf("pipe: destination is not the peer: %w", link.ErrNoRoute)

var (
	errClosed = fmt.Errorf("pipe: %w", link.ErrClosed)
	errTooBig = fmt.Errorf("pipe: %w", link.ErrTooBig)
	errShort  = errors.New("pipe: packet shorter than BTH and ICRC")
)

// Config configures a pipe. The zero value is usable.
type Config struct {
	// A and B are the two ends' addresses, of one family; the zero values
	// mean 10.0.0.1 and 10.0.0.2.
	A, B netip.Addr
	// MTU is the IP MTU; 0 means 1500.
	MTU int
	// Buffers is the pool size shared by both ends; 0 means 1024.
	Buffers int
	// AtoB and BtoA are the faults of each direction.
	AtoB, BtoA netem.Faults
	// Seed seeds the fault injector.
	Seed uint64
	// Clock, when set, is the pipe's clock; it must not go back.
	Clock func() time.Time
	// Manual, when set and Clock is not, makes the pipe's clock the time
	// last passed to Advance (starting at the zero Time).
	Manual bool
}

type shared struct {
	mu      sync.Mutex
	cfg     Config
	pool    *pool.Pool // guarded by mu: both ends allocate from it
	bufSize int
	manual  time.Time
	dir     [2]direction // 0: A to B, 1: B to A
	ends    [2]*Link
}

// Link is one end of a pipe.
type Link struct {
	s      *shared
	side   int // 0 for A, 1 for B
	addr   netip.Addr
	peer   netip.Addr
	info   link.Info
	ipID   uint16
	stats  link.Stats
	closed bool
	wake   chan struct{} // capacity 1: something arrived or time moved
	woken  atomic.Bool   // Wake was called: the next Wait returns
	done   chan struct{} // closed by Close
	timer  *time.Timer
	g      bth.Datagram
	// hdr writes the IP and UDP headers of every packet sent, hl long.
	hdr bth.DatagramTemplate
	hl  int
}

// New makes a pipe and returns its two ends.
func New(cfg Config) (a, b *Link) {
	if !cfg.A.IsValid() {
		cfg.A = netip.MustParseAddr("10.0.0.1")
	}
	if !cfg.B.IsValid() {
		cfg.B = netip.MustParseAddr("10.0.0.2")
	}
	cfg.A, cfg.B = cfg.A.Unmap(), cfg.B.Unmap()
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.Buffers == 0 {
		cfg.Buffers = 1024
	}
	s := &shared{cfg: cfg}
	for i, f := range []netem.Faults{cfg.AtoB, cfg.BtoA} {
		if f == (netem.Faults{}) {
			s.dir[i] = new(perfect)
			continue
		}
		s.dir[i] = netem.NewPath[flight](f, rand.New(rand.NewPCG(cfg.Seed, uint64(i)+0x9e3779b97f4a7c15)))
	}
	// Room for headroom, the largest datagram's payload and rounding.
	s.bufSize = link.Headroom + cfg.MTU
	s.pool = pool.New(cfg.Buffers, s.bufSize)
	mk := func(side int, addr, peer netip.Addr) *Link {
		l := &Link{s: s, side: side, addr: addr, peer: peer,
			wake: make(chan struct{}, 1), done: make(chan struct{})}
		l.info = link.Info{Kind: "pipe", Name: fmt.Sprintf("pipe%c", 'A'+side), Addr: addr, MTU: cfg.MTU}
		l.hdr = bth.NewDatagramTemplate(&bth.DatagramFields{Src: addr, Dst: peer, DstPort: bth.RoCEPort, TTL: 64, DF: true})
		l.hl = l.hdr.HeaderLen()
		l.timer = time.NewTimer(time.Hour)
		l.timer.Stop()
		return l
	}
	a, b = mk(0, cfg.A, cfg.B), mk(1, cfg.B, cfg.A)
	s.ends = [2]*Link{a, b}
	return a, b
}

func (s *shared) now() time.Time {
	switch {
	case s.cfg.Clock != nil:
		return s.cfg.Clock()
	case s.cfg.Manual:
		return s.manual
	}
	return time.Now()
}

// Advance tells the pipe the time moved: in Manual mode it sets the pipe's
// clock to now (which never goes backwards); in any mode it wakes waiters
// so they look again.
func (l *Link) Advance(now time.Time) {
	s := l.s
	s.mu.Lock()
	if s.cfg.Manual && s.cfg.Clock == nil && now.After(s.manual) {
		s.manual = now
	}
	s.mu.Unlock()
	for _, e := range s.ends {
		e.poke()
	}
}

// Wake implements link.Waker: the Wait in progress, or else the next,
// returns at once. Any goroutine may call it.
func (l *Link) Wake() {
	l.woken.Store(true)
	l.poke()
}

func (l *Link) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Next returns when the next packet bound for this end falls due, if any
// is in flight (held-back packets excluded).
func (l *Link) Next() (time.Time, bool) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir[1-l.side].Next()
}

// FaultStats returns what the injector did to packets sent by this end.
func (l *Link) FaultStats() netem.Stats {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.dir[l.side].Stats()
}

// Alloc implements link.Link.
func (l *Link) Alloc(pkts []*link.Packet) int {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.closed {
		return 0
	}
	return s.pool.Alloc(pkts)
}

// Release implements link.Link.
func (l *Link) Release(pkts []*link.Packet) {
	s := l.s
	s.mu.Lock()
	s.pool.Release(pkts)
	s.mu.Unlock()
}

func (s *shared) put(p *link.Packet) { s.pool.Put(p) }

// Send implements link.Link.
func (l *Link) Send(pkts []*link.Packet) (int, error) {
	s := l.s
	s.mu.Lock()
	sent, err := l.send(pkts)
	s.mu.Unlock()
	if sent > 0 {
		s.ends[1-l.side].poke()
	}
	return sent, err
}

func (l *Link) send(pkts []*link.Packet) (int, error) {
	s := l.s
	peer := s.ends[1-l.side]
	w, _ := s.dir[l.side].(*perfect)
	if l.closed || peer.closed || w == nil {
		return l.sendEach(pkts)
	}
	for _, p := range pkts {
		if !l.sound(p) {
			return l.sendEach(pkts)
		}
	}
	// The common batch: every packet sound, to a peer that listens,
	// over a perfect direction. Two passes: every packet's IP and UDP
	// headers, then every ICRC. The ICRC reads the headers in 8-byte
	// words that span the header stores just made, and a load that
	// spans two stores still in the store buffer cannot be forwarded:
	// it waits for them to reach the cache. Hashing a packet right after
	// its headers cost about 8 ns more per 64-byte WRITE in
	// BenchmarkBandwidth.
	for _, p := range pkts {
		// putHeaders, written out: it is too large to inline.
		sport := p.SrcPort
		if sport == 0 {
			sport = defaultSrcPort
		}
		l.hdr.Put(p.Buf, p.Off, p.Len, p.TOS, l.ipID, sport)
		l.ipID++
	}
	w.reserve(s.now(), len(pkts))
	sent := 0
	var err error
	for i, p := range pkts {
		ip, end := p.Off-l.hl, p.Off+p.Len
		dg := p.Buf[ip:end]
		crc, e := bth.ICRC(dg) // bth.PutICRC, without its call
		if e != nil {
			err = l.drop(pkts, i, fmt.Errorf("pipe: %w", e), err)
			continue
		}
		bth.SetICRC(dg, crc)
		l.stats.TxBytes += uint64(p.Len)
		sent++
		pkts[i] = nil
		w.put(flight{p: p, ip: ip, n: end - ip, pool: s.pool})
	}
	l.stats.TxPackets += uint64(sent)
	return sent, err
}

// sound reports, without a call, whether check would find nothing wrong
// with p addressed in the peer's own form.
func (l *Link) sound(p *link.Packet) bool {
	return p.Len >= bth.BTHLen+bth.ICRCLen && p.Remote == l.peer &&
		l.hl+p.Len <= l.s.cfg.MTU && p.Off >= l.hl && p.Off+p.Len <= len(p.Buf)
}

// check reports what is wrong with a packet to send, if anything.
func (l *Link) check(p *link.Packet) error {
	switch {
	case p.Len < bth.BTHLen+bth.ICRCLen:
		return errShort
	case p.Remote != l.peer && p.Remote.Unmap().IsValid() && p.Remote.Unmap() != l.peer:
		return ErrNotPeer
	case l.hl+p.Len > l.s.cfg.MTU || p.Off < l.hl || p.Off+p.Len > len(p.Buf):
		return errTooBig
	}
	return nil
}

// defaultSrcPort is the UDP source port of a packet that names none.
const defaultSrcPort = 0xc000

// putHeaders writes p's IP and UDP headers in front of it.
func (l *Link) putHeaders(p *link.Packet) {
	sport := p.SrcPort
	if sport == 0 {
		sport = defaultSrcPort
	}
	l.hdr.Put(p.Buf, p.Off, p.Len, p.TOS, l.ipID, sport)
	l.ipID++
}

// drop frees pkts[i], which cannot be sent for err, and returns the
// first error of the batch: first, or else err.
func (l *Link) drop(pkts []*link.Packet, i int, err, first error) error {
	l.s.put(pkts[i])
	pkts[i] = nil
	l.stats.TxDropped++
	if first != nil {
		return first
	}
	return err
}

// sendEach sends pkts one by one: a batch with a packet to drop, a
// closed end or a direction with faults.
func (l *Link) sendEach(pkts []*link.Packet) (int, error) {
	s := l.s
	var err error
	now := s.now()
	d := s.dir[l.side]
	peer := s.ends[1-l.side]
	for i, p := range pkts {
		if l.closed {
			err = l.drop(pkts, i, errClosed, err)
			continue
		}
		if e := l.check(p); e != nil {
			err = l.drop(pkts, i, e, err)
			continue
		}
		l.putHeaders(p)
	}
	sent := 0
	for i, p := range pkts {
		if p == nil {
			continue
		}
		ip, end := p.Off-l.hl, p.Off+p.Len
		if e := bth.PutICRC(p.Buf[ip:end]); e != nil {
			err = l.drop(pkts, i, fmt.Errorf("pipe: %w", e), err)
			continue
		}
		l.stats.TxPackets++
		l.stats.TxBytes += uint64(p.Len)
		sent++
		pkts[i] = nil
		if peer.closed {
			s.put(p)
			continue
		}
		d.Send(now, flight{p: p, ip: ip, n: end - ip, pool: s.pool})
	}
	return sent, err
}

// Recv implements link.Link.
func (l *Link) Recv(pkts []*link.Packet) (int, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	d := s.dir[1-l.side]
	w, _ := d.(*perfect) // called directly, inlined
	now := s.now()
	d.ReleaseHeld(now)
	n := 0
	for n < len(pkts) {
		var fl flight
		var ok bool
		if w != nil {
			fl, ok = w.Deliver(now)
		} else {
			fl, ok = d.Deliver(now)
		}
		if !ok {
			break
		}
		p := fl.p
		dg := p.Buf[fl.ip : fl.ip+fl.n]
		if err := bth.ParseDatagram(dg, &l.g); err != nil || l.g.Dst != l.addr {
			l.stats.RxDropped++
			s.put(p)
			continue
		}
		// bth.VerifyICRC, without its call.
		if crc, err := bth.ICRC(dg); err != nil || bth.CarriedICRC(dg) != crc {
			l.stats.RxICRCErrors++
			s.put(p)
			continue
		}
		// Field by field: a composite literal is built on the stack
		// and copied over with a write barrier check for all of it.
		p.Off, p.Len = fl.ip+l.g.Off, l.g.End-l.g.Off
		p.Remote, p.Local = l.g.Src, l.g.Dst
		p.SrcPort, p.TOS, p.Unverified = l.g.SrcPort, l.g.TOS, false
		l.stats.RxPackets++
		l.stats.RxBytes += uint64(p.Len)
		pkts[n] = p
		n++
	}
	return n, nil
}

// Wait implements link.Link. A timeout is not an error: Wait returns nil
// and the next Recv may find nothing.
func (l *Link) Wait(timeout time.Duration) error {
	s := l.s
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	realTime := s.cfg.Clock == nil && !s.cfg.Manual
	for {
		if l.woken.Swap(false) {
			return nil
		}
		s.mu.Lock()
		if l.closed {
			s.mu.Unlock()
			return errClosed
		}
		d := s.dir[1-l.side]
		now := s.now()
		d.ReleaseHeld(now)
		next, ready := d.Due(now)
		s.mu.Unlock()
		if ready {
			return nil
		}
		// Sleep until woken, the deadline, or (in real time) the next
		// delivery.
		sleep := time.Duration(-1)
		if !deadline.IsZero() {
			if sleep = time.Until(deadline); sleep <= 0 {
				return nil
			}
		}
		if realTime && !next.IsZero() {
			if dn := max(time.Until(next), 0); sleep < 0 || dn < sleep {
				sleep = dn
			}
		}
		if sleep >= 0 {
			l.timer.Reset(sleep)
		}
		select {
		case <-l.wake:
		case <-l.done:
		case <-l.timer.C:
		}
		l.timer.Stop()
	}
}

// Info implements link.Link.
func (l *Link) Info() link.Info { return l.info }

// Stats implements link.Link.
func (l *Link) Stats() link.Stats {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.stats
}

// Close implements link.Link. Packets in flight to this end are freed; the
// peer's later sends to it are counted as sent and vanish.
func (l *Link) Close() error {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	s.dir[1-l.side].Discard()
	return nil
}
