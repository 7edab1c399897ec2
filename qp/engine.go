package qp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/cc/cnp"
	"github.com/uroce/uroce/pkg/hist"
	"github.com/uroce/uroce/pkg/link"
)

// Port is where the engine gets transmit buffers and sends packets; a
// link.Link is one.
type Port interface {
	Alloc(pkts []*link.Packet) int
	Send(pkts []*link.Packet) (int, error)
	Release(pkts []*link.Packet)
}

// FirstQPN is the first QP number the engine hands out; below it lie QP0,
// QP1 and the numbers rxe reserves (RXE_MIN_QP_INDEX).
const FirstQPN = 0x11

const (
	// txBatch is how many packets the engine gathers before a Send.
	txBatch = 64
	// sendBudget bounds the packets one QP sends per turn, for fairness.
	sendBudget = 64
	// maxUnackedPSNs bounds the PSNs in flight (rxe's RXE_MAX_UNACKED_PSNS).
	maxUnackedPSNs = 128
	// maxAllocBatch bounds the transmit buffers taken in one Alloc.
	maxAllocBatch = 16
	// maxPktPerAck: the requester asks for an ACK at least this often
	// within a long message (rxe's RXE_MAX_PKT_PER_ACK).
	maxPktPerAck = 64
)

// Engine owns every QP of a device and drives them: Receive hands it
// packets, Process runs timers and requesters, both at the time now. It is
// not safe for concurrent use.
//
// Time is always an argument: Receive and Process take the time of their
// turn, PostSend its WR's post time, CCStats the time it reports at.
// Intervals are time.Time differences (Sub), so a clock that carries
// monotonic readings, as time.Now's do, keeps RTTs, latencies and timers
// true across steps of the wall clock.
type Engine struct {
	port Port
	// MRs is the device's memory region table.
	MRs MRTable
	qps []*QP
	// freeQPN holds the numbers of destroyed QPs, oldest first, from
	// freeHead on (qpnQuarantine).
	freeQPN  []uint32
	freeHead int
	timers   timerWheel
	ready    []*QP
	acks     []*QP // QPs with a coalesced ACK due at the burst's end
	txq      []*link.Packet
	one      [1]*link.Packet
	// spare holds transmit buffers taken in one Alloc and not used yet,
	// spare[nextSpare:nSpare]; the rest go back at the end of the turn.
	// allocHint is how many the last turn that sent used: a turn of one
	// packet (a latency loop) takes one, a burst up to maxAllocBatch.
	spare     [maxAllocBatch]*link.Packet
	nextSpare int
	nSpare    int
	turnPkts  int
	allocHint int
	pkt       bth.Packet
	pf        bth.PacketFields
	now       time.Time
	// nowNS is now on the engine's own clock (mono): read once per turn,
	// so a packet's timestamps are int64 arithmetic, not time.Time's.
	nowNS int64
	clock monoClock
	// Counters holds the engine's own counters; Stats adds the QPs'.
	Counters EngineCounters
	// warm is where QP.warmRequester's loads go.
	warm uint64
	// OnStateChange, if set, is called after a QP changes state (see
	// StateChange), by the engine's owner: for logging, off the data path.
	OnStateChange func(*StateChange)
	// lat holds the QPs' completion latencies, a slot each (latSlot);
	// retiredLat those of destroyed QPs, for Latency.
	lat        hist.Table
	retiredLat hist.Snapshot
	// ChooseTOS, when set, is called for each packet of a QP to choose
	// its TOS byte (response: an ACK or a READ or atomic response), in
	// place of the default: the QP's traffic class, or the AH's for a
	// datagram, with ECT(0) on data when its congestion control marks.
	ChooseTOS func(q *QP, response bool) uint8
	// CC is the congestion control of QPs whose QPConfig names none: the
	// device default. NewEngine sets "none" at DefaultLineRate with the
	// firmware's notification point, so CE-marked packets are answered
	// with CNPs whatever this side runs, as a ConnectX peer expects. A zero
	// LineRate means DefaultLineRate.
	CC cc.Config
	// PacerBurst is each paced QP's token bucket depth in bytes; 0 means
	// DefaultPacerBurst. It applies to QPs created after it is set.
	PacerBurst int
	// PortMTU is the port's active MTU in bytes, the largest datagram a
	// UD or GSI QP sends; 0 means 1024 (rxe's on 1500-byte Ethernet). It
	// applies to QPs created after it is set.
	PortMTU int
	// Addr is the port's own address, written as the destination into
	// the GRH of a received datagram when the link does not report it.
	Addr netip.Addr
	// OnAsyncEvent, when set, receives the asynchronous events
	// (ibv_get_async_event's), by the engine's owner, as they happen.
	OnAsyncEvent func(AsyncEvent)
	// gsi is QP1, if created.
	gsi *QP
	grh [GRHLen]byte
	// sack is where a selective ACK's bitmap is drawn (sr.go).
	sack [bth.SACKLen]byte
}

func (e *Engine) portMTU() int {
	if e.PortMTU == 0 {
		return 1024
	}
	return e.PortMTU
}

// NewEngine returns an engine that sends through port.
func NewEngine(port Port) *Engine {
	return &Engine{port: port, txq: make([]*link.Packet, 0, txBatch), CC: cc.DefaultConfig(cc.KindNone, DefaultLineRate)}
}

// CreateQP makes a QP in the RESET state. It returns ErrBadAttr for a
// missing CQ, a zero capacity or an unknown type, ErrBusy for a second GSI
// QP, ErrTooManyQPs when no QPN is free, and an error wrapping
// cc.ErrUnknownKind or cc.ErrBadParams for a bad cfg.CC. A GSI QP is QP1;
// the others are numbered from FirstQPN.
func (e *Engine) CreateQP(cfg QPConfig) (*QP, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil || cfg.MaxSendWR < 1 || cfg.MaxRecvWR < 0 || cfg.MaxInline < 0 {
		return nil, fmt.Errorf("create QP: %w: CQs and a send queue are required", ErrBadAttr)
	}
	if s := cfg.SRQ; s != nil && (s.e != e || s.gone || s.cfg.PD != cfg.PD) {
		return nil, fmt.Errorf("create QP: %w: SRQ of another engine or PD, or destroyed", ErrBadAttr)
	}
	switch cfg.Type {
	case 0:
		cfg.Type = QPTypeRC
	case QPTypeRC, QPTypeUC, QPTypeUD:
	case QPTypeGSI:
		if e.gsi != nil {
			return nil, fmt.Errorf("create QP: %w: the GSI QP exists", ErrBusy)
		}
	default:
		return nil, fmt.Errorf("create QP: %w: type %d", ErrBadAttr, cfg.Type)
	}
	if cfg.MaxSendSGE <= 0 {
		cfg.MaxSendSGE = 1
	}
	if cfg.MaxRecvSGE <= 0 {
		cfg.MaxRecvSGE = 1
	}
	ss := ringSize(cfg.MaxSendWR)
	var b *qpBlock
	var ring []sendWQE
	if ss <= smallRing {
		sb := new(qpBlockSmall)
		b, ring = &sb.qpBlock, sb.sq[:ss]
	} else {
		b, ring = new(qpBlock), make([]sendWQE, ss)
	}
	q := &b.qp
	*q = QP{e: e,
		typ: cfg.Type, pd: cfg.PD, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ, signalAll: cfg.SignalAll,
		cfg: qpConfig{MaxSendWR: cfg.MaxSendWR, MaxRecvWR: cfg.MaxRecvWR, MaxSendSGE: cfg.MaxSendSGE,
			MaxRecvSGE: cfg.MaxRecvSGE, MaxInline: cfg.MaxInline, SRQ: cfg.SRQ, CC: cfg.CC, AckDelay: cfg.AckDelay}}
	q.cc().timer = timer{idx: -1, qp: q, kind: timerCC}
	q.cc().pace = timer{idx: -1, qp: q, kind: timerPace}
	if err := e.ccInit(q, cfg.CC); err != nil {
		return nil, fmt.Errorf("create QP: %w", err)
	}
	var idx uint32
	if cfg.Type == QPTypeGSI {
		q.qpn = GSIQPN
	} else if len(e.freeQPN)-e.freeHead > qpnQuarantine {
		idx = e.freeQPN[e.freeHead]
		e.freeHead++
		if e.freeHead > len(e.freeQPN)/2 {
			e.freeQPN = e.freeQPN[:copy(e.freeQPN, e.freeQPN[e.freeHead:])]
			e.freeHead = 0
		}
	} else {
		if FirstQPN+len(e.qps) > bth.QPNMask {
			return nil, fmt.Errorf("create QP: %w", ErrTooManyQPs)
		}
		idx = uint32(len(e.qps))
		e.qps = append(e.qps, nil)
	}
	if q.qpn == 0 {
		q.qpn = FirstQPN + idx
	}
	e.lat.Grow(q.latSlot() + 1)
	q.retrans = timer{idx: -1, qp: q, kind: timerRetrans}
	q.rnr = timer{idx: -1, qp: q, kind: timerRNR}
	q.ackTimer = timer{idx: -1, qp: q, kind: timerAck}
	if cfg.AckDelay > 0 {
		q.ack = ackDelays
	}
	q.sq = sendQueue{wqes: ring, mask: uint32(ss - 1), size: uint32(cfg.MaxSendWR), maxSGE: uint32(cfg.MaxSendSGE)}
	for i := range q.sq.wqes {
		w := &q.sq.wqes[i]
		if cfg.MaxSendSGE == 1 {
			w.sge, w.mrs = w.sgeBuf[:0:1], w.mrBuf[:0:1]
		} else {
			w.sge = make([]SGE, 0, cfg.MaxSendSGE)
			w.mrs = make([]*MR, 0, cfg.MaxSendSGE)
		}
		w.inline = make([]byte, 0, cfg.MaxInline)
	}
	rs := ringSize(max(cfg.MaxRecvWR, 1))
	q.rq = recvQueue{wqes: make([]recvWQE, rs), mask: uint32(rs - 1), size: uint32(cfg.MaxRecvWR)}
	for i := range q.rq.wqes {
		w := &q.rq.wqes[i]
		w.sge = make([]SGE, 0, cfg.MaxRecvSGE)
		w.mrs = make([]*MR, 0, cfg.MaxRecvSGE)
	}
	if s := cfg.SRQ; s != nil {
		q.srq = s
		q.srqWQE.sge = make([]SGE, 0, s.cfg.MaxSGE)
		q.srqWQE.mrs = make([]*MR, 0, s.cfg.MaxSGE)
		s.refs++
	}
	q.resp.opcode = opNone
	q.comp.opcode = opNone
	q.initType()
	cfg.SendCQ.refs++
	cfg.RecvCQ.refs++
	if q.qpn == GSIQPN {
		e.gsi = q
	} else {
		e.qps[idx] = q
	}
	return q, nil
}

// DestroyQP removes a QP; its outstanding WRs vanish without completions,
// as ibv_destroy_qp's do. It returns ErrNoQP for a QP of another engine or
// one already destroyed.
func (e *Engine) DestroyQP(q *QP) error {
	if q.e != e || e.QP(q.qpn) != q {
		return fmt.Errorf("destroy QP %d: %w", q.qpn, ErrNoQP)
	}
	e.releaseAck(q)
	e.stopTimer(&q.retrans)
	e.stopTimer(&q.rnr)
	e.stopTimer(&q.cc().timer)
	e.stopTimer(&q.cc().pace)
	e.retireLatency(q)
	q.state = StateReset
	q.sendCQ.refs--
	q.recvCQ.refs--
	if q.srq != nil {
		q.srq.refs--
	}
	if q.qpn == GSIQPN {
		e.gsi = nil
		return nil
	}
	idx := q.qpn - FirstQPN
	e.qps[idx] = nil
	e.freeQPN = append(e.freeQPN, idx)
	// A QP on the ready list is skipped there: its state is RESET.
	return nil
}

// qpnQuarantine is how many destroyed QPs' numbers wait before the oldest
// is given out again. A number reused at once meets what still names the
// old QP: the connection manager holds it for its connection until
// time-wait ends (a Dial right after a Close failed), and a peer's late
// packets reach the new QP. rxe allocates QPNs cyclically for the same
// reason; the table here stays dense and grows by at most this many.
const qpnQuarantine = 64

// AppendQPs appends every live QP to dst, in QPN order, and returns it:
// for counters and metrics that walk a device's QPs.
func (e *Engine) AppendQPs(dst []*QP) []*QP {
	if e.gsi != nil {
		dst = append(dst, e.gsi)
	}
	for _, q := range e.qps {
		if q != nil {
			dst = append(dst, q)
		}
	}
	return dst
}

// CQInUse reports whether any QP uses the CQ.
func (e *Engine) CQInUse(c *CQ) bool { return c.refs > 0 }

// QP returns the QP with this number, or nil.
func (e *Engine) QP(qpn uint32) *QP {
	if qpn == GSIQPN {
		return e.gsi
	}
	idx := qpn - FirstQPN
	if qpn < FirstQPN || int(idx) >= len(e.qps) {
		return nil
	}
	return e.qps[idx]
}

// NextDeadline returns the earliest armed timer, if any: when Process next
// has something to do without new packets.
func (e *Engine) NextDeadline() (time.Time, bool) {
	return e.timers.next()
}

// Busy reports whether some QP has packets it could send now.
func (e *Engine) Busy() bool { return len(e.ready) > 0 }

// Receive processes received RoCE packets. The packets stay the caller's:
// the engine copies what it keeps. Responses and requests it generates are
// sent before Receive returns; the requests of one QP in pkts that ask for
// an ACK share one (ackBurst).
func (e *Engine) Receive(now time.Time, pkts []*link.Packet) {
	e.setNow(now)
	for _, lp := range pkts {
		e.receiveOne(lp)
	}
	for i, q := range e.acks {
		// A QP reset or destroyed during the burst (an OnStateChange
		// that calls back into the engine) owes nothing.
		if q.state != StateReset && !e.holdAck(q) {
			e.flushAck(q)
		}
		e.acks[i] = nil
	}
	e.acks = e.acks[:0]
	e.sendBatch()
	e.endTurn()
}

func (e *Engine) receiveOne(lp *link.Packet) {
	p := &e.pkt
	if err := p.Decode(lp.RoCE()); err != nil {
		e.Counters.BadPacket++
		return
	}
	if qpn, ok := cnp.Is(p); ok {
		// A CNP carries no P_Key check and no PSN: it only names the QP
		// that must slow down (IBA A17.9.3). It comes from the peer,
		// whose notification point answers the QP's CE-marked packets,
		// so a connected QP takes it only from there: anyone else
		// could throttle the QP at will.
		if q := e.QP(qpn); q != nil {
			if q.typ.connected() && !e.fromPeer(q, lp) {
				q.ctr.BadAddr++
				return
			}
			e.Counters.CNPsRcvd++
			e.ccCNP(q)
		} else {
			e.Counters.NoQP++
		}
		return
	}
	svc := p.Opcode().Service()
	if svc != bth.ServiceRC && svc != bth.ServiceUD && svc != bth.ServiceUC {
		e.Counters.BadPacket++
		return
	}
	h := p.BTH()
	q := e.QP(h.DestQP())
	if q == nil {
		e.Counters.NoQP++
		return
	}
	if svc != q.typ.service() {
		// The opcode is not of the QP's service (rxe's
		// check_type_state).
		q.ctr.Dropped++
		return
	}
	if svc != bth.ServiceUD && !e.fromPeer(q, lp) {
		q.ctr.BadAddr++
		return
	}
	// IBA 10.9.3: the low 15 bits must match and one side must be a full
	// member.
	if pk := h.PKey(); pk&0x7fff != q.pkey&0x7fff || (pk|q.pkey)&0x8000 == 0 {
		e.Counters.BadPKey++
		return
	}
	// The responder counts requests (every UC and UD packet is one),
	// the requester responses.
	request := p.Has(bth.Request)
	c := &q.req.pkts
	if request {
		c = &q.resp.pkts
	}
	c.rcvd(p.PayloadLen(), &q.ctr)
	if svc == bth.ServiceUD {
		e.receiveDatagram(q, p, lp)
		return
	}
	if lp.CE() {
		e.ccCE(q)
	}
	if svc == bth.ServiceUC {
		if !q.state.receives() {
			q.ctr.Dropped++
			return
		}
		e.respondUC(q, p)
		return
	}
	if request {
		if !q.state.receives() {
			q.ctr.Dropped++
			return
		}
		// The common request, a WRITE in order, is taken without
		// respond's larger frame.
		if !e.respondWrite(q, p, h, h.PSN(), p.Opcode()) {
			e.respond(q, p)
		}
		return
	}
	if !q.state.sends() {
		q.ctr.Dropped++
		return
	}
	e.complete(q, p)
}

// setNow starts a turn at now.
func (e *Engine) setNow(now time.Time) {
	e.now, e.nowNS = now, e.clock.ns(now)
}

// monoClock turns the time.Time values the engine is given into int64
// nanoseconds, so that what a packet does with time (its send time for
// the RTT, a WR's latency) is an integer subtraction. Readings are
// nanoseconds since the first time seen (by time.Time's Sub, so the
// monotonic reading counts where both carry one), plus monoOffset: they
// are positive for any time within a century of it, and 0 stays free to
// mean "none".
type monoClock struct {
	base time.Time
	set  bool
	// last and lastNS cache the latest conversion: the times of one
	// turn, and a burst of PostSends given one reading, convert once.
	last   time.Time
	lastNS int64
}

const monoOffset = 1 << 62

func (c *monoClock) ns(t time.Time) int64 {
	// Equal representations (wall, monotonic reading and location)
	// give equal differences: == is the cache's key, not a comparison
	// of instants.
	if c.set && t == c.last {
		return c.lastNS
	}
	return c.convert(t)
}

// convert is ns past its cache, out of line so that the cache's look
// inlines at ns's callers.
func (c *monoClock) convert(t time.Time) int64 {
	if !c.set {
		c.base, c.set = t, true
	}
	c.last, c.lastNS = t, int64(t.Sub(c.base))+monoOffset
	return c.lastNS
}

// fromPeer reports whether a connected QP's packet came from the QP's peer
// to this port, as rxe's check_addr requires of RC and UC packets: the IP
// source must be the path's destination and the IP destination the port's
// address. Without it anyone who learns or guesses a QPN and a PSN in the
// window could inject requests from elsewhere. The UDP source port is not
// checked: rxe and ConnectX choose it per QP or per flow for ECMP entropy
// (the RoCEv2 annex leaves it to the sender), so it says nothing. IPv4
// and its IPv4-mapped GID form are the same address. A link that does not
// report the destination (Local zero), or a port bound to no one address,
// leaves that half to the socket, which only delivers what was sent to it.
func (e *Engine) fromPeer(q *QP, lp *link.Packet) bool {
	if !lp.Remote.IsValid() || !sameAddr(lp.Remote, q.destAddr) {
		return false
	}
	l := lp.Local
	return l == e.Addr || !l.IsValid() || !e.Addr.IsValid() || e.Addr.IsUnspecified() || sameAddrForms(l, e.Addr)
}

// sameAddr reports whether a and b are one IP address, IPv4 in either
// form, whatever IPv6 zone either names. It does not allocate.
func sameAddr(a, b netip.Addr) bool {
	// The common case, one form on both sides, inlines at the caller.
	return a == b || sameAddrForms(a, b)
}

func sameAddrForms(a, b netip.Addr) bool {
	return a.Unmap().WithZone("") == b.Unmap().WithZone("")
}

// Process fires the timers that are due and lets QPs with work send, then
// sends what was built.
func (e *Engine) Process(now time.Time) {
	e.setNow(now)
	// A timer fired may re-arm one for now: look again until none is due.
	for due := e.timers.expire(now); len(due) > 0; due = e.timers.expire(now) {
		for _, t := range due {
			if t.idx != idxFiring {
				continue // stopped or moved by a timer fired before it
			}
			t.idx = idxStopped
			e.fire(t)
		}
	}
	n := len(e.ready)
	for i := 0; i < n; i++ {
		q := e.ready[i]
		q.queued = false
		more := false
		if q.responding {
			if q.resp.rdRes == nil {
				q.responding = false
			} else {
				more = q.state.receives() && !e.sendResponses(q, sendBudget)
			}
		}
		if e.runRequester(q, sendBudget) || more {
			e.schedule(q)
		}
	}
	m := copy(e.ready, e.ready[n:])
	clear(e.ready[m:])
	e.ready = e.ready[:m]
	e.sendBatch()
	e.endTurn()
}

// fire runs a timer that is due.
func (e *Engine) fire(t *timer) {
	switch t.kind {
	case timerRetrans:
		e.retransTimeout(t.qp)
	case timerRNR:
		t.qp.req.waitRNR = false
		e.schedule(t.qp)
	case timerCC:
		e.ccTimer(t.qp)
	case timerPace:
		e.schedule(t.qp)
	case timerAck:
		e.ackTimeout(t.qp)
	}
}

// schedule puts a QP on the ready list, so the next Process runs its
// requester and READ responses (rxe's rxe_sched_task); once is enough
// however often it is asked.
func (e *Engine) schedule(q *QP) {
	if !q.queued {
		q.queued = true
		e.ready = append(e.ready, q)
	}
}

func (e *Engine) setTimer(t *timer, when time.Time) { e.timers.set(t, when) }
func (e *Engine) stopTimer(t *timer)                { e.timers.remove(t) }

// newPacket takes a transmit buffer and writes the headers of a packet
// with payloadLen bytes of payload from e.pf and bf, pad and ICRC zeroed.
// It returns the buffer and the payload bytes to fill, or nil when no
// buffer is free or the packet does not fit.
func (e *Engine) newPacket(q *QP, bf *bth.BTHFields, payloadLen int, response bool) (*link.Packet, []byte) {
	// Send a full batch before taking a buffer: the last packet of the
	// batch has been filled by now, this one not yet.
	if len(e.txq) == cap(e.txq) {
		e.sendBatch()
	}
	lp := e.allocTx()
	if lp == nil {
		e.Counters.NoBuffer++
		return nil, nil
	}
	n := bth.PacketLen(bf.Opcode, payloadLen)
	b := lp.Buf[lp.Off:]
	if len(b) < n {
		// The path MTU exceeds the link's: a configuration error the
		// verbs layer prevents; drop rather than overrun the buffer.
		e.Counters.NoBuffer++
		e.one[0] = lp
		e.port.Release(e.one[:])
		e.one[0] = nil
		return nil, nil
	}
	bf.PadCnt = uint8(-payloadLen & 3)
	bf.PKey = q.pkey
	if q.typ.connected() {
		bf.DestQP = q.destQPN // a datagram's is its WR's
	}
	hl := e.pf.EncodeHeaders(b, bf)
	// The pad (at most 3 bytes) and the ICRC the link fills: one store
	// and a short loop rather than a call to clear 4 to 7 bytes.
	binary.LittleEndian.PutUint32(b[n-bth.ICRCLen:n], 0)
	for i := hl + payloadLen; i < n-bth.ICRCLen; i++ {
		b[i] = 0
	}
	lp.Len = n
	lp.Remote = q.destAddr
	lp.SrcPort = q.sport
	switch {
	case e.ChooseTOS != nil:
		lp.TOS = e.ChooseTOS(q, response)
	case !q.ccNone && q.cc().ect && (!response || payloadLen > 0):
		// Requests and READ responses carry ECT(0); ACKs stay
		// Not-ECT, as ConnectX sends them.
		lp.TOS = q.tclass&^3 | link.ECT0
	default:
		lp.TOS = q.tclass
	}
	c := &q.req.pkts
	if response {
		c = &q.resp.pkts
	}
	c.sent(payloadLen, &q.ctr)
	e.txq = append(e.txq, lp)
	return lp, b[hl : hl+payloadLen]
}

// allocTx returns a transmit buffer, or nil when the port has none. It
// takes them from the port allocHint at a time: one Alloc, and one lock in
// a link that has one, per batch rather than per packet.
func (e *Engine) allocTx() *link.Packet {
	// Small enough to inline. A slot keeps its pointer until the batch
	// is cleared (allocBatch, endTurn).
	if e.nextSpare < e.nSpare {
		e.nextSpare++
		return e.spare[e.nextSpare-1]
	}
	return e.allocBatch()
}

// allocBatch takes the next batch of transmit buffers from the port and
// returns its first, or nil when the port has none.
func (e *Engine) allocBatch() *link.Packet {
	clear(e.spare[:e.nSpare]) // all taken
	e.turnPkts += e.nextSpare
	want := min(max(e.allocHint, 1), maxAllocBatch)
	e.nextSpare, e.nSpare = 0, e.port.Alloc(e.spare[:want])
	if e.nSpare == 0 {
		return nil
	}
	e.nextSpare = 1
	return e.spare[0]
}

// endTurn gives the unused transmit buffers back, so the engine holds none
// between turns, and notes how many this turn used if it sent.
func (e *Engine) endTurn() {
	if e.nextSpare < e.nSpare {
		e.port.Release(e.spare[e.nextSpare:e.nSpare])
	}
	clear(e.spare[:e.nSpare])
	e.turnPkts += e.nextSpare
	e.nextSpare, e.nSpare = 0, 0
	if e.turnPkts > 0 {
		// A turn that sent nothing (a receive turn on a sender
		// whose ACKs come in) says nothing about the next burst.
		e.allocHint, e.turnPkts = e.turnPkts, 0
	}
}

// sendBatch hands the packets built so far (txq) to the port in one Send
// and counts those it could not send.
func (e *Engine) sendBatch() {
	if len(e.txq) == 0 {
		return
	}
	n, _ := e.port.Send(e.txq)
	if n < len(e.txq) {
		e.Counters.TxErrors += uint64(len(e.txq) - n)
	}
	clear(e.txq)
	e.txq = e.txq[:0]
}

// Stats returns the engine's counters with every live QP's added in.
func (e *Engine) Stats() EngineCounters {
	s := e.Counters
	qps := e.qps
	if e.gsi != nil {
		qps = append([]*QP{e.gsi}, e.qps...)
	}
	for _, q := range qps {
		if q == nil {
			continue
		}
		c := q.Counters()
		s.Counters.Add(&c)
		s.CC.Add(q.cc().alg.Stats(e.now).Counters)
	}
	return s
}
