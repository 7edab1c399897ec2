package qp

import (
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc"
)

// QPConfig holds the type and capacities of a new QP (ibv_qp_init_attr).
type QPConfig struct {
	// Type is the transport service; zero means QPTypeRC.
	Type           QPType
	PD             uint32
	SendCQ, RecvCQ *CQ
	MaxSendWR      int
	MaxRecvWR      int
	MaxSendSGE     int // 0 means 1
	MaxRecvSGE     int // 0 means 1
	MaxInline      int
	// SRQ, when set, is where the QP takes its receive WQEs from;
	// MaxRecvWR and MaxRecvSGE are then unused. It must be of the QP's
	// PD.
	SRQ *SRQ
	// SignalAll makes every send WR signaled (sq_sig_all).
	SignalAll bool
	// CC selects the QP's congestion control; nil means the engine's
	// default (Engine.CC).
	CC *cc.Config
	// AckDelay, when positive, lets the responder hold the ACK of a SEND
	// or RDMA WRITE with immediate (a request that hands the application
	// a receive completion) for up to AckDelay, so that it leaves with
	// the next request the QP sends, the application's answer, in one
	// transmit, and the peer wakes once for both. IBA 9.7.5.1.2 lets one
	// ACK cover many requests and leaves when to send it to the
	// responder, within the requester's local ACK timeout, which must
	// stay far above AckDelay. A held ACK whose delay runs out goes out
	// alone, and the QP then acknowledges the next 64 such requests at
	// once, unless it sends a request first (a late answer). Other
	// requests are acknowledged at once.
	AckDelay time.Duration
}

type wqeState uint8

// Send WQE states (rxe's wqe_state_*).
const (
	wqePosted     wqeState = iota // not started, or to be restarted
	wqeProcessing                 // some packets sent
	wqePending                    // every packet sent, waiting for the response
	wqeDone                       // a local operation executed, to complete in order
)

// sendWQE is a posted send WR, 256 bytes. What PostSend writes and the
// requester and completer read for a SEND, WRITE or READ comes first, in
// two cache lines with the SGL of a one-SGE QP (sgeBuf, mrBuf: a separate
// SGL allocation is one more line that is cold when a QP's turn comes
// among thousands). What only atomics, datagrams, inline data and local
// operations read follows, and PostSend writes it only for those: a
// line a WR does not need is a miss it does not pay (BenchmarkManyQPs,
// TestQPLayout).
type sendWQE struct {
	wr       wqeWR
	imm      uint32 // SendWR.Imm, or its InvalidateRKey
	length   uint32
	firstPSN bth.PSN
	lastPSN  bth.PSN
	// offset is the next byte to send (SEND/WRITE) or where the READ
	// request asks the responder to start (after a partial retry).
	offset      uint32
	state       wqeState
	status      WCStatus
	validated   bool
	hasRdAtomic bool
	posted      int64 // PostSend's now on the engine's clock, for Latency
	sge         []SGE
	mrs         []*MR
	sgeBuf      [1]SGE // sge's storage when MaxSendSGE is 1
	mrBuf       [1]*MR // mrs's, likewise
	// An atomic's operands (SendWR.CompareAdd, Swap), set for atomics
	// only.
	compareAdd, swap uint64
	// A datagram's destination QP and Q_Key (SendWR.RemoteQPN,
	// RemoteQKey) and address, copied from wr.AH: set on UD and GSI QPs
	// only.
	remoteQPN, remoteQKey uint32
	inline                []byte
	ah                    AH
	// local holds a bind's or a registration's part (mw.go), allocated
	// the first time the slot carries one.
	local *wqeLocal
	// The WQE stays 256 bytes, so that each starts a cache line.
	_ [16]byte
}

// wqeLocal is what a WRBindMW or WRRegMR keeps of its SendWR.
type wqeLocal struct {
	bind MWBind
	reg  MRReg
}

// wqeWR is what every send WQE keeps of its SendWR, 24 bytes: the
// immediate data and the fields of atomics and datagrams are the WQE's
// own, the SGL and inline data are copied into its slices and the AH into
// ah.
type wqeWR struct {
	ID         uint64
	RemoteAddr uint64
	RKey       uint32
	Opcode     WROpcode
	Flags      SendFlags
	FlushType  FlushType // a FLUSH's FETH (flush.go)
	FlushLevel FlushLevel
}

type recvWQE struct {
	id     uint64
	sge    []SGE
	mrs    []*MR
	length uint32
}

// set copies a receive WR whose SGL fits into the WQE. Its length is the
// SGL's, at most 2^31 (the largest message, rxe's RXE_MAX_MSG_SIZE); its
// keys are resolved when a message first lands in it.
func (w *recvWQE) set(wr *RecvWR) {
	w.id = wr.ID
	w.sge = append(w.sge[:0], wr.SGL...)
	var length uint64
	for _, g := range wr.SGL {
		length += uint64(g.Length)
	}
	w.length = uint32(min(length, 1<<31))
	w.mrs = w.mrs[:0]
}

// sendQueue is the send WQE ring: the completer retires at head, the
// requester works at next, PostSend fills at tail.
type sendQueue struct {
	wqes             []sendWQE
	mask             uint32
	head, next, tail uint32
	size             uint32
	// maxSGE is the WQEs' SGL capacity, kept here so PostSend checks a
	// WR against it without touching a WQE other than the one it fills.
	maxSGE uint32
}

func (s *sendQueue) at(i uint32) *sendWQE { return &s.wqes[i&s.mask] }

type recvQueue struct {
	wqes       []recvWQE
	mask       uint32
	head, tail uint32
	size       uint32
}

func ringSize(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}

// QP is a queue pair: reliable-connected, unreliable connected,
// unreliable datagram or the GSI QP (QP1). Its methods must be called by
// the engine's owner, like the Engine's.
type QP struct {
	// The fields come in the order the data path touches them: with
	// thousands of QPs a QP's lines are cold when its turn comes, so every
	// line a packet touches costs a cache miss (BenchmarkManyQPs). The
	// attributes and configuration a packet reads are stored here, in the
	// first two lines, and nowhere else: attr and cfg keep only the rest,
	// and Attr and Config assemble the public structs. Then the
	// requester's lines, the responder's, and what a packet never
	// touches; each side's per-packet counters are in its own lines
	// (pktCounts), the rest of Counters among the cold fields
	// (TestQPLayout).
	//
	// The first line is what the responder reads of a WRITE and its
	// ACK; the requester reads it too.
	qpn    uint32
	state  QPState
	queued bool
	pkey   uint16
	sport  uint16
	// responding: READ or atomic responses may be owed (resp.rdRes),
	// set when one is queued and cleared by Process once it finds none,
	// so a QP that only requests never touches resp's line in Process.
	responding bool
	// ccNone: the congestion control is none (ccState's inert, not
	// paced, no ECT), here in the QP's first line so that the per-packet
	// cc hooks of such a QP are one branch on a line the packet reads
	// anyway, and an ACK it sends touches no cc line.
	ccNone bool
	// mtu is the path MTU's payload bytes, 32 bits to fit in the
	// first line.
	mtu int32
	// typ is QPConfig.Type; tclass, retransFlags, destQPN, access and
	// destAddr are Attr's TrafficClass, Retrans, DestQPN, AccessFlags
	// and DestAddr.
	typ          QPType
	tclass       uint8
	retransFlags RetransFlags
	// ack says whether the QP may hold ACKs (QPConfig.AckDelay) and
	// whether it holds one, which the QP's next request takes out with
	// it: here, where the requester and the responder look anyway.
	ack      ackFlags
	destQPN  uint32
	pd       uint32 // QPConfig.PD
	access   Access
	destAddr netip.Addr
	// The second line is the requester's: the engine, the send CQ,
	// Attr's HopLimit, Timeout, RetryCnt and RNRRetry (an ACK that makes
	// progress reads the retry counts, resetRetry), QPConfig.SignalAll,
	// and the requester's state and counters.
	e         *Engine
	sendCQ    *CQ // QPConfig.SendCQ
	hopLimit  uint8
	timeout   uint8
	retryCnt  uint8
	rnrRetry  uint8
	signalAll bool
	req       requester
	comp      completer
	sq        sendQueue
	// ccSRTT is the congestion control's smoothed RTT (SRTT), which
	// every ACK's sample updates: here, beside the completer, an ACK of
	// a QP without congestion control touches no line of ccState.
	ccSRTT  time.Duration
	retrans timer
	// lastSent is the send time of the newest request packet, which its
	// ACK usually finds here, in the timer's line, rather than in
	// ccState's ring (ccSent, ccAck).
	lastSent lastSent
	// rto's fields a request or its ACK touches end this line and fill
	// the next.
	rto rtoState
	rnr timer
	// resp starts a line with rdRes, which Process reads for a QP that
	// owes responses, and what the responder touches for a WRITE ONLY
	// and its ACK: with the first line, all a WRITE received touches.
	resp responder
	// sr is selective repeat's state (sr.go), set exactly when the QP
	// does it (srModified).
	sr  *srState
	srq *SRQ
	// ackSkip counts the ACKs still to send at once after a held one
	// ran out (ackTimer), unless the QP sends a request first:
	// ackSkipPSN is its send PSN when the ACK ran out.
	ackSkip    uint8
	ackSkipPSN bth.PSN
	rq         recvQueue
	recvCQ     *CQ     // QPConfig.RecvCQ, beside rq: a receive completion reads both
	srqWQE     recvWQE // the WQE taken from the SRQ, in progress
	// ackTimer bounds how long an ACK is held (QPConfig.AckDelay).
	ackTimer timer
	attr     qpAttr
	cfg      qpConfig
	// ctr counts this QP's traffic and events, but for what each side
	// counts per packet and per WR (req's and resp's pkts, posted and
	// done), so that no packet touches its lines: Counters adds them.
	ctr Counters
}

// qpAttr is what the QP keeps of its Attr beyond the fields in its first
// lines.
type qpAttr struct {
	PKey            uint16
	PathMTU         int
	RQPSN, SQPSN    uint32
	MinRNRTimer     uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	QKey            uint32
}

// qpConfig is what the QP keeps of its QPConfig beyond the fields in its
// first lines.
type qpConfig struct {
	MaxSendWR, MaxRecvWR   int
	MaxSendSGE, MaxRecvSGE int
	MaxInline              int
	SRQ                    *SRQ
	CC                     *cc.Config
	AckDelay               time.Duration
}

// QPN returns the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// State returns the QP's state.
func (q *QP) State() QPState { return q.state }

// Attr returns the QP's attributes.
func (q *QP) Attr() Attr {
	return Attr{
		State: q.state, AccessFlags: q.access, PKey: q.attr.PKey,
		DestAddr: q.destAddr, HopLimit: q.hopLimit, TrafficClass: q.tclass,
		PathMTU: q.attr.PathMTU, DestQPN: q.destQPN, RQPSN: q.attr.RQPSN, SQPSN: q.attr.SQPSN,
		Timeout: q.timeout, RetryCnt: q.retryCnt, RNRRetry: q.rnrRetry, Retrans: q.retransFlags,
		MinRNRTimer: q.attr.MinRNRTimer, MaxRdAtomic: q.attr.MaxRdAtomic, MaxDestRdAtomic: q.attr.MaxDestRdAtomic,
		QKey: q.attr.QKey,
	}
}

// Config returns the QP's capacities.
func (q *QP) Config() QPConfig {
	c := &q.cfg
	return QPConfig{
		Type: q.typ, PD: q.pd, SendCQ: q.sendCQ, RecvCQ: q.recvCQ,
		MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE, MaxRecvSGE: c.MaxRecvSGE,
		MaxInline: c.MaxInline, SRQ: c.SRQ, SignalAll: q.signalAll, CC: c.CC, AckDelay: c.AckDelay,
	}
}

// PostSend queues a send work request posted at now, the time its
// completion latency counts from (Latency). It returns ErrBadState unless
// the QP is in RTS, SQD, SQE or ERR (where the WR completes flushed),
// ErrQueueFull when MaxSendWR WRs are outstanding, and ErrBadWR for a
// malformed WR (on a UD or GSI QP also: an opcode other than SEND, no AH
// or destination, a remote QPN over 24 bits; on a UC QP a READ or an
// atomic).
func (q *QP) PostSend(now time.Time, wr *SendWR) error {
	q.warmRequester()
	if !q.state.CanPostSend() {
		return fmt.Errorf("post send on QP %d: %w: %s", q.qpn, ErrBadState, q.state)
	}
	s := &q.sq
	if s.tail-s.head >= s.size {
		return fmt.Errorf("post send on QP %d: %w", q.qpn, ErrQueueFull)
	}
	if !wr.Opcode.valid() {
		return fmt.Errorf("post send: %w: opcode %d", ErrBadWR, wr.Opcode)
	}
	inline := wr.Flags&FlagInline != 0
	if len(wr.SGL) > int(s.maxSGE) && !inline {
		return fmt.Errorf("post send: %w: %d SGEs, max %d", ErrBadWR, len(wr.SGL), s.maxSGE)
	}
	if inline && (wr.Opcode.isReadAtomic() || len(wr.InlineData) > q.cfg.MaxInline) {
		return fmt.Errorf("post send: %w: inline data of %d bytes (max %d) on %s", ErrBadWR, len(wr.InlineData), q.cfg.MaxInline, wr.Opcode)
	}
	if wr.Opcode.isExt() {
		if err := checkExtWR(q.typ, wr); err != nil {
			return err
		}
	}
	if wr.Opcode >= WRSendWithInv && q.typ != QPTypeRC {
		return fmt.Errorf("post send: %w: %s on a %s QP", ErrBadWR, wr.Opcode, q.typ)
	}
	if wr.Opcode.isLocal() && (len(wr.SGL) > 0 || len(wr.InlineData) > 0) {
		return fmt.Errorf("post send: %w: %s with data", ErrBadWR, wr.Opcode)
	}
	if q.typ != QPTypeRC {
		if err := checkTypeWR(q.typ, wr); err != nil {
			return err
		}
	}
	w := s.at(s.tail)
	// Field by field, not *wr: copying the slices' headers into the ring
	// would make every caller's SGL escape to the heap. Nor a wqeWR
	// literal: the compiler builds it on the stack in small stores and
	// copies it in 16-byte loads, which cannot be forwarded from those
	// stores and wait for them (about 12 ns a post in the profile of
	// BenchmarkBandwidth/RDMA_WRITE/64).
	ww := &w.wr
	ww.ID, ww.RemoteAddr, ww.RKey = wr.ID, wr.RemoteAddr, wr.RKey
	ww.Opcode, ww.Flags, ww.FlushType, ww.FlushLevel = wr.Opcode, wr.Flags, wr.FlushType, wr.FlushLevel
	w.imm = wr.Imm
	if !q.typ.connected() {
		w.remoteQPN, w.remoteQKey, w.ah = wr.RemoteQPN, wr.RemoteQKey, *wr.AH
	}
	switch wr.Opcode {
	case WRCompareSwap, WRFetchAdd:
		w.compareAdd, w.swap = wr.CompareAdd, wr.Swap
	case WRSendWithInv, WRLocalInv:
		w.imm = wr.InvalidateRKey
	case WRBindMW, WRRegMR:
		if w.local == nil {
			w.local = new(wqeLocal)
		}
		w.local.bind, w.local.reg = wr.Bind, wr.Reg
	}
	if q.signalAll {
		w.wr.Flags |= FlagSignaled
	}
	// The WQE's inline data is read only for an inline WR, so only one
	// sets it. With MaxSendSGE 1 the SGL is the WQE's own sgeBuf (CreateQP),
	// and the common WR, one SGE, is written there without loading the
	// WQE's lines: at thousands of QPs they are cold, and a load would
	// wait for them where stores do not.
	var length uint64
	switch {
	case inline:
		w.sge = w.sge[:0]
		w.inline = append(w.inline[:0], wr.InlineData...)
		length = uint64(len(wr.InlineData))
	case len(wr.SGL) == 1 && s.maxSGE == 1:
		w.sgeBuf[0] = wr.SGL[0]
		w.sge = w.sgeBuf[:1]
		length = uint64(wr.SGL[0].Length)
	case len(wr.SGL) == 1:
		// One element appended, not a slice: no call to memmove.
		w.sge = append(w.sge[:0], wr.SGL[0])
		length = uint64(wr.SGL[0].Length)
	default:
		w.sge = append(w.sge[:0], wr.SGL...)
		for i := range wr.SGL {
			length += uint64(wr.SGL[i].Length)
		}
	}
	if wr.Opcode == WRFlush {
		length = uint64(wr.FlushLen) // the RETH's and the completion's
	}
	if length > 1<<31 {
		length = 1<<31 + 1 // fails with a local length error when started
	}
	w.length = uint32(length)
	w.state, w.status = wqePosted, WCSuccess
	w.posted = q.e.clock.ns(now)
	w.offset, w.validated, w.hasRdAtomic = 0, false, false
	s.tail++
	count16(&q.req.posted, &q.ctr.PostedSends)
	if q.state == StateErr {
		q.flushQueues()
		return nil
	}
	q.e.schedule(q)
	return nil
}

// warmRequester loads a word of each line of q that the requester's turn
// reads after PostSend: the timer line (the newest send's time, and
// rto's first fields) and rto's next line, which the adaptive timeout
// (the default) reads and writes for every request. Among thousands of
// QPs they are cold. Loaded here, their misses overlap those of the
// lines PostSend reads itself; left to the turn, they come one after
// another, each a memory latency on the message's path
// (BenchmarkManyQPs/10000: some 160 ns less a message). Go has no
// prefetch instruction: the engine keeps the loads' sum so that the
// compiler does not drop them.
//
// A ring in the QP's block (qpBlockSmall) also has the two lines of its
// first WQE loaded: an emptied ring starts again there (completeSend),
// so an idle QP's next WQE is that slot, at an address known without
// reading the ring's indices from the QP's cold lines. Found only after
// them, the slot's lines were a second memory latency on PostSend's
// path (BenchmarkManyQPs/10000: some 80 ns less a message).
func (q *QP) warmRequester() {
	v := uint64(q.lastSent.at) ^ uint64(q.rto.last)
	if q.sq.mask < smallRing {
		// The ring is the block's own: CreateQP makes one that
		// small only in a qpBlockSmall, whose first field q is.
		w := &(*qpBlockSmall)(unsafe.Pointer(q)).sq[0]
		v ^= w.wr.ID ^ w.sgeBuf[0].Addr
	}
	q.e.warm ^= v
}

// PostRecv queues a receive work request. It returns ErrBadState in RESET,
// ErrQueueFull when MaxRecvWR WRs are outstanding, ErrBadWR for too many
// SGEs and ErrHasSRQ for a QP with an SRQ.
func (q *QP) PostRecv(wr *RecvWR) error {
	if q.srq != nil {
		return fmt.Errorf("post recv on QP %d: %w", q.qpn, ErrHasSRQ)
	}
	if !q.state.CanPostRecv() {
		return fmt.Errorf("post recv on QP %d: %w: %s", q.qpn, ErrBadState, q.state)
	}
	r := &q.rq
	if r.tail-r.head >= r.size {
		return fmt.Errorf("post recv on QP %d: %w", q.qpn, ErrQueueFull)
	}
	w := &r.wqes[r.tail&r.mask]
	if len(wr.SGL) > cap(w.sge) {
		return fmt.Errorf("post recv: %w: %d SGEs, max %d", ErrBadWR, len(wr.SGL), cap(w.sge))
	}
	w.set(wr)
	r.tail++
	if q.state == StateErr {
		q.flushQueues()
	}
	return nil
}

// Modify changes the QP's attributes and state (ibv_modify_qp), with the
// checks of IBA 11.2.4.2: ErrBadTransition for a transition the spec does
// not allow, ErrMissingAttr for a required attribute missing, ErrBadAttr
// for a value out of range.
func (q *QP) Modify(a *Attr, mask AttrMask) error {
	if err := checkModify(q.typ, q.state, a, mask); err != nil {
		return fmt.Errorf("modify QP %d: %w", q.qpn, err)
	}
	// Selective repeat changes what the packets carry: once the QP
	// receives, turning it on or off would misread the peer's packets.
	if mask&AttrRetrans != 0 && q.state >= StateRTR && (a.Retrans^q.retransFlags)&RetransSelective != 0 {
		return fmt.Errorf("modify QP %d: %w: selective repeat is fixed from RTR on", q.qpn, ErrBadAttr)
	}
	next := q.state
	if mask&AttrState != 0 {
		next = a.State
	}
	if mask&AttrAccessFlags != 0 {
		q.access = a.AccessFlags
	}
	if mask&AttrQKey != 0 && q.typ == QPTypeUD {
		q.attr.QKey = a.QKey
	}
	if mask&AttrAV != 0 {
		q.destAddr, q.hopLimit, q.tclass = a.DestAddr, a.HopLimit, a.TrafficClass
	}
	if mask&AttrPKeyIndex != 0 || q.pkey == 0 {
		q.pkey = a.PKey
		if q.pkey == 0 {
			q.pkey = 0xffff
		}
		q.attr.PKey = q.pkey
	}
	if mask&AttrPathMTU != 0 {
		q.attr.PathMTU, q.mtu = a.PathMTU, int32(a.PathMTU)
	}
	if mask&AttrDestQPN != 0 {
		q.destQPN = a.DestQPN
		q.sport = bth.SrcPortForFlow(bth.FlowLabel(q.qpn, a.DestQPN))
	}
	if mask&AttrRQPSN != 0 {
		q.attr.RQPSN = a.RQPSN
		q.resp.psn = bth.PSN(a.RQPSN)
		q.resp.ackPSN = q.resp.psn
	}
	if mask&AttrSQPSN != 0 {
		q.attr.SQPSN = a.SQPSN
		q.req.psn = bth.PSN(a.SQPSN)
		q.req.highPSN = q.req.psn
		q.comp.psn = q.req.psn
	}
	if mask&AttrTimeout != 0 {
		q.timeout = a.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		q.retryCnt = a.RetryCnt
		q.comp.retryCnt = a.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		q.rnrRetry = a.RNRRetry
		q.comp.rnrRetry = a.RNRRetry
	}
	if mask&AttrMinRNRTimer != 0 {
		q.attr.MinRNRTimer = a.MinRNRTimer
	}
	if mask&AttrRetrans != 0 {
		q.retransFlags = a.Retrans
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		// Credits in use stay in use.
		q.req.rdAtomic += int16(a.MaxRdAtomic) - int16(q.attr.MaxRdAtomic)
		q.attr.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		q.attr.MaxDestRdAtomic = a.MaxDestRdAtomic
		q.resp.res = make([]resource, a.MaxDestRdAtomic)
		q.resp.resNext = 0
	}
	q.srModified(mask)
	prev := q.state
	q.state = next
	q.e.stateChanged(q, prev, next, true)
	switch {
	case next == StateReset && prev != StateReset:
		q.reset()
	case next == StateErr && prev != StateErr:
		q.toError()
	case next == StateRTS:
		q.e.schedule(q)
	case next == StateSQD:
		q.e.schedule(q)
	}
	return nil
}

// reset empties the queues without completions (IBA 10.3.1: RESET).
func (q *QP) reset() {
	q.e.releaseAck(q)
	q.e.stopRetrans(q)
	q.rto = rtoState{}
	q.e.stopTimer(&q.rnr)
	q.ackSkip = 0
	// A reset QP starts its congestion control afresh, as a new one
	// would; the configuration it was given cannot fail twice.
	cfg := q.cc().cfg
	_ = q.e.ccInit(q, &cfg)
	q.sq.head, q.sq.next, q.sq.tail = 0, 0, 0
	q.rq.head, q.rq.tail = 0, 0
	res := q.resp.res
	clear(res)
	q.req, q.comp, q.resp = requester{}, completer{}, responder{res: res[:0]}
	q.sr = nil // as the attributes: none until Modify asks for it
	q.resp.opcode = opNone
	q.comp.opcode = opNone
	q.attr = qpAttr{}
	q.access, q.destAddr, q.hopLimit, q.tclass, q.destQPN = 0, netip.Addr{}, 0, 0, 0
	q.timeout, q.retransFlags, q.retryCnt, q.rnrRetry = 0, 0, 0, 0
	q.pkey, q.mtu = 0, 0
	q.initType()
}

// initType sets what a UD or GSI QP has from creation on: the port MTU as
// its message limit, rxe's UDP source port for its QPN
// (rxe_qp_init_req), and for GSI the fixed Q_Key.
func (q *QP) initType() {
	if q.typ.connected() {
		return
	}
	q.mtu = int32(q.e.portMTU())
	q.sport = bth.SrcPortForQPN(q.qpn)
	if q.typ == QPTypeGSI {
		q.attr.QKey = GSIQKey
	}
}

// checkUDWR checks what a datagram's WR must carry.
func checkUDWR(wr *SendWR) error {
	if !wr.Opcode.isSend() {
		return fmt.Errorf("post send: %w: %s on a datagram QP", ErrBadWR, wr.Opcode)
	}
	if wr.AH == nil || !wr.AH.DGID.IsValid() {
		return fmt.Errorf("post send: %w: datagram without an address handle", ErrBadWR)
	}
	if wr.RemoteQPN > bth.QPNMask {
		return fmt.Errorf("post send: %w: remote QPN %#x", ErrBadWR, wr.RemoteQPN)
	}
	return nil
}

// toError moves the QP to ERR and flushes every outstanding WR (IBA
// 10.3.1: all WRs complete with a flush error).
func (q *QP) toError() {
	q.e.stateChanged(q, q.state, StateErr, false)
	q.state = StateErr
	q.e.releaseAck(q)
	q.resp.rdRes = nil
	q.e.stopRetrans(q)
	q.e.stopTimer(&q.rnr)
	q.req.needRetry, q.req.waitRNR = false, false
	q.flushQueues()
}

// fail gives a send WQE an error status and moves the QP to ERR, as rxe's
// COMPST_ERROR and requester error paths do: the WQE completes with its
// status, every other outstanding WQE with a flush error, in order.
func (q *QP) fail(w *sendWQE, st WCStatus) {
	w.status = st
	q.toError()
}

// flushQueues completes every outstanding WR, send and receive, with
// WCWRFlushErr, or a failed send WQE with its own status (IBA 10.3.1: in
// ERR every WR completes flushed; rxe's flush_send_queue and
// flush_recv_queue).
func (q *QP) flushQueues() {
	for q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		if w.status == WCSuccess {
			w.status = WCWRFlushErr
		}
		q.completeSend(w)
	}
	q.sq.next = q.sq.head
	if q.resp.haveWQE {
		q.resp.haveWQE = false
		q.completeRecv(WCWRFlushErr, WCRecv, 0, 0, 0)
	}
	for q.rq.head != q.rq.tail {
		q.completeRecv(WCWRFlushErr, WCRecv, 0, 0, 0)
	}
}

// completeSend retires the WQE at the head of the send queue, writing a
// completion if it is signaled or failed (rxe's do_complete).
func (q *QP) completeSend(w *sendWQE) {
	if w.hasRdAtomic {
		w.hasRdAtomic = false
		q.req.rdAtomic++
	}
	if w.wr.Flags&FlagSignaled != 0 || w.status != WCSuccess {
		if wc := q.sendCQ.slot(); wc != nil {
			n := w.length
			if w.status != WCSuccess {
				n = 0
			}
			wc.WRID, wc.Status, wc.Opcode, wc.Flags = w.wr.ID, w.status, wcOpcodeOf[w.wr.Opcode], 0
			wc.ByteLen, wc.Imm, wc.QPN, wc.SrcQP, wc.SrcGID = n, 0, q.qpn, 0, netip.Addr{}
			q.sendCQ.commit()
		}
	}
	if w.status == WCSuccess {
		if w.wr.Flags&FlagSignaled != 0 {
			// Its completion latency (latency.go): the engine's
			// now is the completion time.
			q.e.lat.Record(q.latSlot(), uint64(max(q.e.nowNS-w.posted, 0)))
		}
		count16(&q.req.done, &q.ctr.CompletedSends)
		if op := w.wr.Opcode; op == WRSend || op == WRSendWithImm {
			q.ctr.RDMASends++
		}
	}
	if q.sq.next == q.sq.head {
		q.sq.next++
	}
	if q.sq.head++; q.sq.head == q.sq.tail {
		// Empty: the next WQE takes slot 0, whose lines PostSend
		// loads ahead (warmRequester). Nothing keeps a ring position
		// of an empty ring.
		q.sq.head, q.sq.next, q.sq.tail = 0, 0, 0
	}
}

// completeRecv retires the receive WQE at the head of the receive queue.
func (q *QP) completeRecv(st WCStatus, op WCOpcode, byteLen, imm uint32, flags WCFlags) {
	q.retireRecvWQE(q.recvWQE(), st, op, byteLen, imm, flags, q.destQPN, netip.Addr{})
}

// retireRecvWQE retires w, the receive WQE at the head, with its
// completion. The completion is written in place (CQ.slot), field by
// field: a Completion literal is built on the stack in small stores and
// copied into the ring in 16-byte loads, which cannot be forwarded from
// those stores and wait for them to reach the cache.
func (q *QP) retireRecvWQE(w *recvWQE, st WCStatus, op WCOpcode, byteLen, imm uint32, flags WCFlags, srcQP uint32, gid netip.Addr) {
	id := w.id
	q.retireRecv()
	if st == WCSuccess {
		count16(&q.resp.done, &q.ctr.CompletedRecvs)
	}
	if wc := q.recvCQ.slot(); wc != nil {
		wc.WRID, wc.Status, wc.Opcode, wc.Flags = id, st, op, flags
		wc.ByteLen, wc.Imm, wc.QPN, wc.SrcQP, wc.SrcGID = byteLen, imm, q.qpn, srcQP, gid
		q.recvCQ.commit()
	}
}

// timeoutDur is the local ACK timeout: 4.096 µs × 2^Timeout, 0 when the
// timer is disabled (IBA 11.2.4.2).
func (q *QP) timeoutDur() time.Duration {
	if q.timeout == 0 {
		return 0
	}
	return time.Duration(4096<<q.timeout) * time.Nanosecond
}

func durationUS(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }
