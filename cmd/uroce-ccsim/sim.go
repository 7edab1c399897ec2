package main

import (
	"cmp"
	"math/rand/v2"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/netem"
)

// Params describe the network.
type Params struct {
	LinkRate cc.Rate       // every link: sender NICs and the bottleneck
	BaseRTT  time.Duration // propagation round trip, without queueing or serialisation
	MTU      int           // bytes per packet on the wire
	Buffer   int           // switch port buffer, bytes
	RED      netem.RED
	PFC      bool // pause all senders above XOff, resume below XOn
	XOff     int
	XOn      int
	Sample   time.Duration // sampling period of the recorded series
	Seed     uint64
}

// DefaultParams is the DCQCN paper's setting: 40 Gb/s, RED with Kmin 5 KB,
// Kmax 200 KB, Pmax 1 %, PFC as a last resort.
func DefaultParams() Params {
	return Params{
		LinkRate: 40 * cc.Gbps,
		BaseRTT:  8 * time.Microsecond,
		MTU:      1024,
		Buffer:   4 << 20,
		RED:      netem.PaperRED(),
		PFC:      true,
		XOff:     1 << 20,
		XOn:      1<<20 - 64<<10,
		Sample:   20 * time.Microsecond,
		Seed:     1,
	}
}

// FlowSpec is one sender: active from Start until Stop (0: the end).
type FlowSpec struct{ Start, Stop time.Duration }

type evKind uint8

const (
	evWake     evKind = iota // sender may send
	evTimer                  // sender's cc timer
	evArrive                 // packet reaches the switch port
	evPortDone               // port finished serialising its head packet
	evDeliver                // packet reaches the receiver
	evAck                    // ACK reaches the sender
	evCNP                    // CNP reaches the sender
	evLoss                   // sender learns of a drop
	evPause                  // PFC pause/resume reaches the senders
	evStart
	evStop
	evSample
)

type event struct {
	at   int64 // ns
	kind evKind
	flow int32
	gen  uint32
	pkt  packet
}

type packet struct {
	sent int64 // when the sender put it on the wire
	size int32
	ce   bool
	flag bool // evPause: pause (true) or resume
	// tel is the switch port's in-band telemetry, stamped as the packet
	// leaves it and echoed in its ACK (HPCC §3.1).
	tel cc.INTHop
}

// Compare orders events by time (netem.Timed); netem.Heap breaks ties by
// scheduling order, which keeps runs deterministic.
func (e *event) Compare(f *event) int { return cmp.Compare(e.at, f.at) }

type sender struct {
	spec     FlowSpec
	alg      cc.Algorithm // requester side
	np       cc.Algorithm // the receiver's QP, for its notification point
	pacer    cc.Pacer
	active   bool
	inflight int
	nicFree  int64
	wakeGen  uint32
	wakeAt   int64
	wakeSet  bool
	timerGen uint32
	timerAt  time.Time
	lastRate cc.Rate

	delivered int64 // bytes at the receiver, this sample period
	totalDel  int64
}

// Sim is one run.
type Sim struct {
	p     Params
	kind  cc.Kind
	cfg   cc.Config
	epoch time.Time
	now   int64
	q     netem.Heap[event, *event]
	rng   *rand.Rand
	snd   []sender

	// switch port
	fifo      []packetRef
	queue     int // bytes waiting or being serialised
	busy      bool
	pauseSent bool
	paused    bool   // as the senders see it
	txBytes   uint64 // the port's transmitted bytes counter, for INT

	path cc.INTPath // an ACK's telemetry, handed to INTAlgorithm.OnINT

	rec Record
}

type packetRef struct {
	flow int32
	pkt  packet
}

// Record is what a run measured.
type Record struct {
	Sample   time.Duration
	Times    []time.Duration
	Queue    []int       // bytes at each sample
	Thru     [][]float64 // per flow, Gb/s over each sample period
	Rate     [][]float64 // per flow, cc rate in Gb/s (0 when inactive)
	Active   [][]bool
	Pauses   int
	Drops    int
	CNPs     uint64
	Marked   uint64
	Bytes    int64 // delivered
	Duration time.Duration
}

// NewSim builds a run of flows with the algorithm cfg selects.
func NewSim(p Params, cfg cc.Config, flows []FlowSpec) *Sim {
	s := &Sim{
		p:     p,
		kind:  cfg.Kind,
		cfg:   cfg,
		epoch: time.Unix(0, 0),
		rng:   rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)),
		snd:   make([]sender, len(flows)),
	}
	s.rec.Sample = p.Sample
	s.rec.Thru = make([][]float64, len(flows))
	s.rec.Rate = make([][]float64, len(flows))
	s.rec.Active = make([][]bool, len(flows))
	for i, f := range flows {
		s.snd[i].spec = f
		s.schedule(event{at: int64(f.Start), kind: evStart, flow: int32(i)})
		if f.Stop > 0 {
			s.schedule(event{at: int64(f.Stop), kind: evStop, flow: int32(i)})
		}
	}
	s.schedule(event{at: 0, kind: evSample})
	return s
}

func (s *Sim) schedule(e event) { s.q.Push(e) }

// newAlgorithm builds cfg's algorithm. HPCC is built directly: cc.New
// refuses it (cc.ErrNoINT) because a real QP's path carries no INT, and
// this switch stamps it.
func newAlgorithm(cfg cc.Config) (cc.Algorithm, error) {
	if cfg.Kind == cc.KindHPCC {
		return cc.NewHPCC(cfg.HPCC, cfg.NP, cfg.LineRate)
	}
	return cc.New(&cfg)
}

func (s *Sim) t(ns int64) time.Time { return s.epoch.Add(time.Duration(ns)) }

// oneWay is the propagation delay of one hop (sender→switch,
// switch→receiver); the return path takes two.
func (s *Sim) oneWay() int64 { return int64(s.p.BaseRTT) / 4 }

func (s *Sim) tx(n int) int64 { return int64(s.p.LinkRate.TxTime(n)) }

// Run simulates until d.
func (s *Sim) Run(d time.Duration) *Record {
	end := int64(d)
	for s.q.Len() > 0 {
		e := s.q.Pop()
		if e.at > end {
			break
		}
		s.now = e.at
		s.handle(e)
	}
	s.rec.Duration = d
	for i := range s.snd {
		if s.snd[i].np == nil {
			continue
		}
		st := s.snd[i].np.Stats(s.t(end))
		s.rec.CNPs += st.NPCNPSent
		s.rec.Marked += st.NPECNMarkedRoCEPackets
	}
	return &s.rec
}

func (s *Sim) handle(e event) {
	f := &s.snd[e.flow]
	now := s.t(e.at)
	switch e.kind {
	case evStart:
		var err error
		if f.alg, err = newAlgorithm(s.cfg); err != nil {
			panic(err)
		}
		if f.np, err = newAlgorithm(s.cfg); err != nil {
			panic(err)
		}
		f.active = true
		f.pacer = cc.NewPacer(f.alg.Rate(), s.p.MTU)
		f.lastRate = f.alg.Rate()
		s.wake(e.flow, e.at)
	case evStop:
		f.active = false
	case evWake:
		if e.gen != f.wakeGen {
			return
		}
		f.wakeSet = false
		s.trySend(e.flow)
	case evTimer:
		if e.gen != f.timerGen {
			return
		}
		f.alg.OnTimer(now)
		s.synced(e.flow, true)
	case evArrive:
		s.enqueue(e.flow, e.pkt)
	case evPortDone:
		s.dequeue()
	case evDeliver:
		s.snd[e.flow].delivered += int64(e.pkt.size)
		s.snd[e.flow].totalDel += int64(e.pkt.size)
		s.rec.Bytes += int64(e.pkt.size)
		back := e.at + 2*s.oneWay()
		if e.pkt.ce && f.np.OnCE(now) {
			s.schedule(event{at: back, kind: evCNP, flow: e.flow})
		}
		s.schedule(event{at: back, kind: evAck, flow: e.flow, pkt: e.pkt})
	case evAck:
		f.inflight -= int(e.pkt.size)
		rtt := time.Duration(e.at - e.pkt.sent)
		if ia, ok := f.alg.(cc.INTAlgorithm); ok {
			// The receiver echoed the one hop's stamp in the ACK.
			s.path.N, s.path.Hops[0] = 1, e.pkt.tel
			ia.OnINT(now, int(e.pkt.size), rtt, &s.path)
		} else {
			f.alg.OnAck(now, int(e.pkt.size), rtt)
		}
		s.synced(e.flow, true)
	case evCNP:
		f.alg.OnCNP(now)
		s.synced(e.flow, true)
	case evLoss:
		f.inflight -= int(e.pkt.size)
		f.alg.OnLoss(now)
		s.synced(e.flow, true)
	case evPause:
		s.paused = e.pkt.flag
		if !s.paused {
			for i := range s.snd {
				s.wake(int32(i), e.at)
			}
		}
	case evSample:
		s.sample()
		s.schedule(event{at: e.at + int64(s.p.Sample), kind: evSample})
	}
}

// synced re-reads the algorithm after an event: new rate into the pacer,
// timer re-armed, and (if wake) the sender woken in case it may now send.
func (s *Sim) synced(i int32, wake bool) {
	f := &s.snd[i]
	now := s.t(s.now)
	if r := f.alg.Rate(); r != f.lastRate {
		f.pacer.SetRate(now, r)
		f.lastRate = r
	}
	if nt := f.alg.NextTimer(); !nt.Equal(f.timerAt) {
		f.timerAt = nt
		f.timerGen++
		if !nt.IsZero() {
			s.schedule(event{at: int64(nt.Sub(s.epoch)), kind: evTimer, flow: i, gen: f.timerGen})
		}
	}
	if wake {
		s.wake(i, s.now)
	}
}

// wake arranges for the sender to try to send at t, unless it already will
// by then.
func (s *Sim) wake(i int32, t int64) {
	f := &s.snd[i]
	if f.wakeSet && f.wakeAt <= t {
		return
	}
	f.wakeGen++
	f.wakeAt, f.wakeSet = t, true
	s.schedule(event{at: t, kind: evWake, flow: i, gen: f.wakeGen})
}

func (s *Sim) trySend(i int32) {
	f := &s.snd[i]
	if !f.active || s.paused {
		return
	}
	if s.now < f.nicFree {
		s.wake(i, f.nicFree)
		return
	}
	mtu := s.p.MTU
	if w := f.alg.Window(); w > 0 && f.inflight+mtu > w {
		return // an ACK wakes it
	}
	now := s.t(s.now)
	if d := f.pacer.Delay(now, mtu); d > 0 {
		if d != cc.Never {
			s.wake(i, s.now+int64(d))
		}
		return
	}
	f.pacer.Take(now, mtu)
	f.alg.OnSent(now, mtu)
	f.inflight += mtu
	done := s.now + s.tx(mtu)
	f.nicFree = done
	s.schedule(event{at: done + s.oneWay(), kind: evArrive, flow: i, pkt: packet{sent: s.now, size: int32(mtu)}})
	s.synced(i, false) // the byte counter may have raised the rate
	s.wake(i, done)
}

func (s *Sim) enqueue(i int32, p packet) {
	if s.queue+int(p.size) > s.p.Buffer {
		s.rec.Drops++
		// The sender learns of it from a NAK about a round trip later.
		s.schedule(event{at: s.now + int64(s.p.BaseRTT), kind: evLoss, flow: i, pkt: p})
		return
	}
	p.ce = s.p.RED.Mark(s.queue, s.rng.Float64())
	s.queue += int(p.size)
	s.fifo = append(s.fifo, packetRef{i, p})
	if s.p.PFC && !s.pauseSent && s.queue >= s.p.XOff {
		s.pauseSent = true
		s.rec.Pauses++
		s.schedule(event{at: s.now + s.oneWay(), kind: evPause, pkt: packet{flag: true}})
	}
	if !s.busy {
		s.startTx()
	}
}

// startTx starts serialising the head packet and stamps its INT as an
// INT switch does at egress (the HPCC authors' ns-3 switch stamps on
// dequeue): the bytes still queued behind it, the port's byte counter
// with this packet, the link rate and the time.
func (s *Sim) startTx() {
	s.busy = true
	h := &s.fifo[0].pkt
	s.txBytes += uint64(h.size)
	h.tel = cc.INTHop{QLen: uint32(s.queue - int(h.size)), TxBytes: s.txBytes, Rate: s.p.LinkRate, TS: uint64(s.now)}
	s.schedule(event{at: s.now + s.tx(int(h.size)), kind: evPortDone})
}

func (s *Sim) dequeue() {
	h := s.fifo[0]
	s.fifo = s.fifo[1:]
	s.queue -= int(h.pkt.size)
	s.schedule(event{at: s.now + s.oneWay(), kind: evDeliver, flow: h.flow, pkt: h.pkt})
	if s.pauseSent && s.queue <= s.p.XOn {
		s.pauseSent = false
		s.schedule(event{at: s.now + s.oneWay(), kind: evPause, pkt: packet{flag: false}})
	}
	s.busy = false
	if len(s.fifo) > 0 {
		s.startTx()
	}
}

func (s *Sim) sample() {
	s.rec.Times = append(s.rec.Times, time.Duration(s.now))
	s.rec.Queue = append(s.rec.Queue, s.queue)
	per := float64(s.p.Sample) / 1e9
	for i := range s.snd {
		f := &s.snd[i]
		s.rec.Thru[i] = append(s.rec.Thru[i], float64(f.delivered)*8/per/1e9)
		f.delivered = 0
		r := 0.0
		if f.active {
			r = float64(f.alg.Rate()) / 1e9
		}
		s.rec.Rate[i] = append(s.rec.Rate[i], r)
		s.rec.Active[i] = append(s.rec.Active[i], f.active)
	}
}
