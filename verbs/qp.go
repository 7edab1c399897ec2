package verbs

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/qp"
)

// QPCap are a QP's capacities (ibv_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   int
	MaxSendSGE, MaxRecvSGE int
	MaxInline              int
}

// QPInit describes a new QP (ibv_qp_init_attr).
type QPInit struct {
	// Type is the transport: QPTypeRC (the zero value), QPTypeUC,
	// QPTypeUD, or QPTypeGSI for QP1, which a device has at most one of.
	Type           QPType
	SendCQ, RecvCQ *CQ
	// SRQ, when set, is where the QP takes its receive WRs from; its
	// own PostRecv then fails with ErrHasSRQ, and Cap.MaxRecvWR and
	// MaxRecvSGE are unused.
	SRQ *SRQ
	Cap QPCap
	// SignalAll signals every send WR (sq_sig_all).
	SignalAll bool
	// CC selects the QP's congestion control; nil means the device's
	// default (Device.SetCC).
	CC *cc.Config
	// AckDelay, when positive, holds the ACK of a received SEND or RDMA
	// WRITE with immediate for up to that long, so that it leaves with
	// the QP's next request (the application's answer) in one transmit
	// and the peer wakes once for both: for request-and-reply traffic
	// such as rsockets. Zero, the default, acknowledges at once, as rxe
	// does. See qp.QPConfig.AckDelay.
	AckDelay time.Duration
}

// QueuePair is a queue pair (ibv_qp): reliable-connected, unreliable
// connected, unreliable datagram, or the GSI QP.
type QueuePair struct {
	pd *PD
	q  *qp.QP
	// psn is the first send PSN Endpoint(0) and Connect take when given
	// none: random, so that a stranger who learns the QPN still has a
	// 24-bit PSN to guess (rdma_cm and perftest pick theirs so too).
	psn uint32
}

// CreateQP makes a QP in RESET. Errors wrap ErrWrongDevice, ErrBadAttr,
// or ErrBusy for a second GSI QP.
func (pd *PD) CreateQP(init *QPInit) (*QueuePair, error) {
	if init.SendCQ == nil || init.RecvCQ == nil || init.SendCQ.d != pd.d || init.RecvCQ.d != pd.d {
		return nil, fmt.Errorf("create QP: %w", ErrWrongDevice)
	}
	var srq *qp.SRQ
	if init.SRQ != nil {
		if init.SRQ.pd != pd {
			return nil, fmt.Errorf("create QP: SRQ of another PD: %w", ErrWrongDevice)
		}
		srq = init.SRQ.s
	}
	var q *qp.QP
	err := pd.d.withEngine(func() (err error) {
		q, err = pd.d.e.CreateQP(qp.QPConfig{SRQ: srq,
			Type: init.Type, PD: pd.id, SendCQ: init.SendCQ.c, RecvCQ: init.RecvCQ.c,
			MaxSendWR: init.Cap.MaxSendWR, MaxRecvWR: init.Cap.MaxRecvWR,
			MaxSendSGE: init.Cap.MaxSendSGE, MaxRecvSGE: init.Cap.MaxRecvSGE,
			MaxInline: init.Cap.MaxInline, SignalAll: init.SignalAll, CC: init.CC, AckDelay: init.AckDelay,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &QueuePair{pd: pd, q: q, psn: RandomPSN()}, nil
}

// RandomPSN returns a first PSN from the system's random source: 24 bits,
// never 0 (which Endpoint, Connect and rdmacm read as "pick one"). A PSN
// in the window is one of the things a stranger must guess to inject a
// request (docs/security.md), so it comes from crypto/rand rather than a
// generator whose state its outputs reveal.
func RandomPSN() uint32 {
	for {
		var b [4]byte
		rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 on)
		if psn := binary.LittleEndian.Uint32(b[:]) & 0xffffff; psn != 0 {
			return psn
		}
	}
}

// QPN returns the QP number.
func (q *QueuePair) QPN() uint32 { return q.q.QPN() }

// State returns the QP's state.
func (q *QueuePair) State() QPState {
	var s QPState
	q.pd.d.withEngine(func() error { s = q.q.State(); return nil })
	return s
}

// Counters returns the QP's counters.
func (q *QueuePair) Counters() QPCounters {
	var c QPCounters
	q.pd.d.withEngine(func() error { c = q.q.Counters(); return nil })
	return c
}

// Attr returns the QP's attributes and state (ibv_query_qp), e.g.
// whether the connection manager turned selective repeat on
// (Retrans&RetransSelective).
func (q *QueuePair) Attr() QPAttr {
	var a QPAttr
	q.pd.d.withEngine(func() error { a = q.q.Attr(); return nil })
	return a
}

// Modify changes attributes and state (ibv_modify_qp). Errors wrap
// ErrBadTransition, ErrMissingAttr, ErrBadAttr, or ErrMTU when the path MTU
// does not fit the link.
func (q *QueuePair) Modify(a *QPAttr, mask AttrMask) error {
	d := q.pd.d
	if mask&qp.AttrPathMTU != 0 && a.PathMTU > d.MaxPathMTU() {
		return fmt.Errorf("modify QP %d: %w: %d > %d", q.QPN(), ErrMTU, a.PathMTU, d.MaxPathMTU())
	}
	if err := d.withEngine(func() error { return q.q.Modify(a, mask) }); err != nil {
		return err
	}
	if r, ok := d.l.(link.Resolver); ok && mask&qp.AttrAV != 0 {
		r.Resolve(a.DestAddr)
	}
	return nil
}

// Endpoint is what two sides exchange out of band to connect (as
// perftest and rdma_cm do): the address (GID), QPN and first PSN.
type Endpoint struct {
	Addr netip.Addr
	QPN  uint32
	PSN  uint32
}

// ConnectOptions are the connection attributes; zero fields take the
// defaults perftest uses.
type ConnectOptions struct {
	Access      Access // remote access granted; 0 means read, write, atomic, global FLUSH
	PathMTU     int    // 0 means the largest the link carries, at most 4096
	Timeout     uint8  // 0 means 14 (67 ms)
	RetryCnt    uint8  // 0 means 7
	RNRRetry    uint8  // 0 means 7
	MinRNRTimer uint8  // 0 means 12 (0.64 ms)
	RdAtomic    uint8  // 0 means 16, both directions
	// PSN is this side's first PSN; 0 means the QP's own random one,
	// the one Endpoint(0) gives the peer.
	PSN uint32
	// Retrans: the zero value retransmits adaptively, on an RTO learnt
	// from the QP's round trips and never later than Timeout, and fails
	// a WR with WCRetryExcErr after RetryCnt retries, 7 included, as IBA
	// (9.7.6.1.3) and ConnectX do. RetransFixed keeps to the IBA timer
	// alone; RetransRetry7Forever makes RetryCnt 7 retry forever, as
	// rxe does. The peer sees standard RC either way, except with
	// RetransSelective: selective repeat, which only a uroce peer that
	// set it too understands (the connection manager negotiates it).
	Retrans RetransFlags
}

// Endpoint returns this QP's side of a connection with the given first
// PSN; 0 means the QP's own random one (RandomPSN, drawn at CreateQP),
// which Connect then takes when its options give no PSN either.
func (q *QueuePair) Endpoint(psn uint32) Endpoint {
	if psn == 0 {
		psn = q.psn
	}
	return Endpoint{Addr: q.pd.d.Addr(), QPN: q.QPN(), PSN: psn}
}

// Connect takes a QP from RESET through INIT and RTR to RTS toward remote.
// A UC QP takes the path, PSNs and access only: the timeout, retry and
// READ options have no meaning without ACKs (IBA 11.2.4.2), and
// ibv_uc_pingpong and perftest -c UC set none of them.
func (q *QueuePair) Connect(remote Endpoint, o ConnectOptions) error {
	if o.Access == 0 {
		o.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessFlushGlobal
	}
	if o.PathMTU == 0 {
		o.PathMTU = q.pd.d.MaxPathMTU()
	}
	def := func(v *uint8, d uint8) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Timeout, 14)
	def(&o.RetryCnt, 7)
	def(&o.RNRRetry, 7)
	def(&o.MinRNRTimer, 12)
	def(&o.RdAtomic, 16)
	if o.PSN == 0 {
		o.PSN = q.psn
	}
	steps := []struct {
		a QPAttr
		m AttrMask
	}{
		{QPAttr{State: StateInit, AccessFlags: o.Access}, qp.AttrState | qp.AttrAccessFlags | qp.AttrPKeyIndex | qp.AttrPort},
		{QPAttr{State: StateRTR, DestAddr: remote.Addr, HopLimit: 64, PathMTU: o.PathMTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: o.RdAtomic, MinRNRTimer: o.MinRNRTimer, Retrans: o.Retrans},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer | qp.AttrRetrans},
		{QPAttr{State: StateRTS, Timeout: o.Timeout, RetryCnt: o.RetryCnt, RNRRetry: o.RNRRetry, SQPSN: o.PSN, MaxRdAtomic: o.RdAtomic, Retrans: o.Retrans},
			qp.AttrState | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrSQPSN | qp.AttrMaxQPRdAtomic | qp.AttrRetrans},
	}
	if q.q.Config().Type == QPTypeUC {
		steps[1].m &^= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer | qp.AttrRetrans
		steps[2].m = qp.AttrState | qp.AttrSQPSN
	}
	for _, s := range steps {
		if err := q.Modify(&s.a, s.m); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	return nil
}

// PostSend posts a send WR (ibv_post_send) and sends what it can at once
// (with DeferSends, in the engine's next turn).
// Errors wrap ErrBadState, ErrQueueFull, ErrBadWR or ErrClosed; a WR that
// fails later completes with an error status instead. The WR and its
// buffers may be reused when PostSend returns (the engine has copied the
// WR; the data goes out from the registered memory).
//
// In inline mode, with the engine free, the calling goroutine runs the
// requester itself; otherwise it hands the WR to the engine's owner and
// waits for the verdict.
func (q *QueuePair) PostSend(wr *SendWR) error {
	d := q.pd.d
	if d.tryOwn() {
		err := errSendClosed
		now := d.clock()
		if !d.closed.Load() {
			err = q.q.PostSend(now, wr)
		}
		// With DeferSends the WR waits on the QP's ready list for the
		// next turn, unless handed-over work wants one now. Only an
		// inline device gets here: a started one's goroutine owns the
		// engine, and the WR is handed over to it below. The turn runs
		// at the post's time: one clock reading for both.
		if d.runHandedOver() > 0 || !d.deferSend {
			d.runEngineAt(now)
		}
		d.letGo()
		return err
	}
	i, r := d.slot()
	// Field by field, so wr's slices do not escape into the slot.
	r.kind, r.q = reqSend, q.q
	r.sgl = append(r.sgl[:0], wr.SGL...)
	r.send = SendWR{ID: wr.ID, Opcode: wr.Opcode, Flags: wr.Flags, SGL: r.sgl, Imm: wr.Imm,
		RemoteAddr: wr.RemoteAddr, RKey: wr.RKey, CompareAdd: wr.CompareAdd, Swap: wr.Swap,
		RemoteQPN: wr.RemoteQPN, RemoteQKey: wr.RemoteQKey,
		FlushType: wr.FlushType, FlushLevel: wr.FlushLevel, FlushLen: wr.FlushLen,
		InvalidateRKey: wr.InvalidateRKey, Bind: wr.Bind, Reg: wr.Reg}
	if wr.AH != nil {
		// By value: storing wr.AH would make every WR's pointees
		// escape.
		r.ah = *wr.AH
		r.send.AH = &r.ah
	}
	if wr.InlineData != nil {
		r.inline = append(r.inline[:0], wr.InlineData...)
		r.send.InlineData = r.inline
	}
	return d.handOver(i)
}

// PostRecv posts a receive WR (ibv_post_recv). Errors wrap ErrBadState,
// ErrQueueFull, ErrBadWR or ErrClosed. Like PostSend it runs at once on
// a free engine, else through its owner.
func (q *QueuePair) PostRecv(wr *RecvWR) error { return q.pd.d.postRecv(q.q, nil, wr) }

// ActivateUD takes a UD QP from RESET through INIT (with the Q_Key) and
// RTR to RTS with the first send PSN, as ibv_ud_pingpong does; a GSI QP
// takes the same steps with its fixed Q_Key.
func (q *QueuePair) ActivateUD(qkey, psn uint32) error {
	steps := []struct {
		a QPAttr
		m AttrMask
	}{
		{QPAttr{State: StateInit, QKey: qkey}, AttrState | AttrPKeyIndex | AttrPort | AttrQKey},
		{QPAttr{State: StateRTR}, AttrState},
		{QPAttr{State: StateRTS, SQPSN: psn}, AttrState | AttrSQPSN},
	}
	for _, s := range steps {
		if err := q.Modify(&s.a, s.m); err != nil {
			return fmt.Errorf("activate UD: %w", err)
		}
	}
	return nil
}

// Destroy removes the QP; outstanding WRs vanish without completions.
func (q *QueuePair) Destroy() error {
	d := q.pd.d
	return d.withEngine(func() error { return d.e.DestroyQP(q.q) })
}
