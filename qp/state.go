package qp

import (
	"fmt"
	"net/netip"
)

// QPState is the state of a queue pair (IBA 10.3.1).
type QPState uint8

// QP states, with rdma-core's values.
const (
	StateReset QPState = iota
	StateInit
	StateRTR
	StateRTS
	StateSQD
	StateSQE
	StateErr
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// CanPostRecv reports whether receive WRs may be posted (IBA 10.8.2: from
// INIT on; in ERR they are accepted and flushed).
func (s QPState) CanPostRecv() bool { return s != StateReset }

// CanPostSend reports whether send WRs may be posted (RTS, SQD, SQE; in
// ERR they are accepted and flushed).
func (s QPState) CanPostSend() bool { return s >= StateRTS }

// receives reports whether the responder accepts requests (IBA 10.3.1:
// RTR and beyond, until ERR).
func (s QPState) receives() bool { return s >= StateRTR && s <= StateSQE }

// sends reports whether the requester and completer run.
func (s QPState) sends() bool { return s >= StateRTS && s <= StateSQE }

// AttrMask says which fields of an Attr a Modify sets (ibv_qp_attr_mask).
type AttrMask uint32

// Attribute mask bits, with rdma-core's values.
const (
	AttrState           AttrMask = 1 << 0
	AttrAccessFlags     AttrMask = 1 << 3
	AttrPKeyIndex       AttrMask = 1 << 4
	AttrPort            AttrMask = 1 << 5
	AttrQKey            AttrMask = 1 << 6
	AttrAV              AttrMask = 1 << 7
	AttrPathMTU         AttrMask = 1 << 8
	AttrTimeout         AttrMask = 1 << 9
	AttrRetryCnt        AttrMask = 1 << 10
	AttrRNRRetry        AttrMask = 1 << 11
	AttrRQPSN           AttrMask = 1 << 12
	AttrMaxQPRdAtomic   AttrMask = 1 << 13
	AttrMinRNRTimer     AttrMask = 1 << 15
	AttrSQPSN           AttrMask = 1 << 16
	AttrMaxDestRdAtomic AttrMask = 1 << 17
	AttrDestQPN         AttrMask = 1 << 20
	// AttrRetrans sets Attr.Retrans, uroce's own: rdma-core's bits stop
	// at 1 << 25.
	AttrRetrans AttrMask = 1 << 31
)

// MaxRdAtomic is the most outstanding READ/atomic requests a QP supports in
// each direction (rxe's max_qp_rd_atom).
const MaxRdAtomic = 128

// Attr holds QP attributes (ibv_qp_attr with the address vector folded in).
type Attr struct {
	State       QPState
	AccessFlags Access // remote access the responder allows
	PKey        uint16 // 0 means the default 0xffff
	// Address vector: the peer's IP (its GID), hop limit, traffic class.
	DestAddr     netip.Addr
	HopLimit     uint8
	TrafficClass uint8
	// PathMTU in bytes: 256, 512, 1024, 2048 or 4096.
	PathMTU int
	DestQPN uint32
	RQPSN   uint32
	SQPSN   uint32
	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout, 0
	// meaning infinite (IBA 11.2.4.2).
	Timeout uint8
	// RetryCnt counts the transport retries after local ACK timeouts
	// and NAKs: 7 is seven retries, then the WR completes with
	// WCRetryExcErr and the QP moves to ERR (IBA 9.7.6.1.3, C9-140;
	// ConnectX). rxe treats 7 as forever; Retrans's RetransRetry7Forever
	// asks for that. RNRRetry counts retries after RNR NAKs, and 7 does
	// mean forever (IBA 9.7.5.2.8).
	RetryCnt uint8
	RNRRetry uint8
	// Retrans selects adaptive retransmission (the zero value) or the
	// fixed IBA timer, and rxe's infinite RetryCnt 7 (AttrRetrans).
	Retrans RetransFlags
	// MinRNRTimer is the 5-bit code of IBA Table 45 the responder puts in
	// its RNR NAKs.
	MinRNRTimer     uint8
	MaxRdAtomic     uint8 // outstanding READ/atomic this QP sends
	MaxDestRdAtomic uint8 // outstanding READ/atomic this QP answers
	// QKey is a UD QP's Q_Key: received datagrams must carry it (IBA
	// 10.2.5), and a send WR whose RemoteQKey has the high bit set sends
	// it instead. A GSI QP's is always GSIQKey.
	QKey uint32
}

// The attributes each transition of an RC QP requires and allows (IBA
// 11.2.4.2 Table 91; rdma-core's qp_state_table).
type transition struct{ req, opt AttrMask }

var rcTransitions = map[[2]QPState]transition{
	{StateReset, StateInit}: {req: AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateInit}:  {opt: AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateRTR}: {
		req: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
		opt: AttrPKeyIndex | AttrAccessFlags | AttrRetrans,
	},
	{StateRTR, StateRTS}: {
		req: AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic,
		opt: AttrAccessFlags | AttrMinRNRTimer | AttrRetrans,
	},
	{StateRTS, StateRTS}: {opt: AttrAccessFlags | AttrMinRNRTimer | AttrRetrans},
	{StateRTS, StateSQD}: {},
	{StateSQD, StateRTS}: {opt: AttrAccessFlags | AttrMinRNRTimer | AttrRetrans},
	{StateSQD, StateSQD}: {opt: AttrAV | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | AttrPKeyIndex |
		AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMinRNRTimer | AttrAccessFlags | AttrRetrans},
	{StateSQE, StateRTS}: {opt: AttrAccessFlags},
}

// The attributes of a UD (and GSI) QP's transitions (IBA 11.2.4.2;
// rdma-core's qp_state_table for IBV_QPT_UD): a Q_Key from INIT on, the
// send PSN at RTS, no address vector or path (each WR names its own).
var udTransitions = map[[2]QPState]transition{
	{StateReset, StateInit}: {req: AttrPKeyIndex | AttrPort | AttrQKey},
	{StateInit, StateInit}:  {opt: AttrPKeyIndex | AttrPort | AttrQKey},
	{StateInit, StateRTR}:   {opt: AttrPKeyIndex | AttrQKey},
	{StateRTR, StateRTS}:    {req: AttrSQPSN, opt: AttrQKey},
	{StateRTS, StateRTS}:    {opt: AttrQKey},
	{StateRTS, StateSQD}:    {},
	{StateSQD, StateRTS}:    {opt: AttrQKey},
	{StateSQD, StateSQD}:    {opt: AttrPKeyIndex | AttrQKey},
	{StateSQE, StateRTS}:    {opt: AttrQKey},
}

// checkModify validates a transition and its attributes (ib_modify_qp_is_ok
// and rxe_qp_chk_attr) for a QP of type t. PKeyIndex and Port are implied
// for this one-port, one-P_Key device, so their absence is not an error;
// so is a GSI QP's Q_Key, which is fixed.
func checkModify(t QPType, cur QPState, a *Attr, mask AttrMask) error {
	next := cur
	if mask&AttrState != 0 {
		next = a.State
	}
	if next > StateErr {
		return fmt.Errorf("%w: state %d", ErrBadAttr, next)
	}
	implied := AttrPKeyIndex | AttrPort | AttrState
	table := rcTransitions
	if t == QPTypeUC {
		table = ucTransitions
	} else if t != QPTypeRC {
		table = udTransitions
	}
	if t == QPTypeGSI {
		implied |= AttrQKey
	}
	if next == StateReset || next == StateErr {
		if mask&^implied != 0 {
			return fmt.Errorf("%w: %s to %s takes no attributes", ErrBadAttr, cur, next)
		}
		return nil
	}
	tr, ok := table[[2]QPState{cur, next}]
	if !ok {
		return fmt.Errorf("%w: %s to %s", ErrBadTransition, cur, next)
	}
	if missing := tr.req &^ mask &^ implied; missing != 0 {
		return fmt.Errorf("%w: %s to %s needs mask %#x", ErrMissingAttr, cur, next, uint32(missing))
	}
	if extra := mask &^ (tr.req | tr.opt | implied); extra != 0 {
		return fmt.Errorf("%w: %s to %s does not take mask %#x", ErrBadAttr, cur, next, uint32(extra))
	}
	if mask&AttrAccessFlags != 0 && a.AccessFlags&^accessQP != 0 {
		return fmt.Errorf("%w: access flags %#x", ErrBadAttr, uint32(a.AccessFlags))
	}
	if mask&AttrAV != 0 && !a.DestAddr.IsValid() {
		return fmt.Errorf("%w: address vector without a destination", ErrBadAttr)
	}
	if mask&AttrPathMTU != 0 {
		switch a.PathMTU {
		case 256, 512, 1024, 2048, 4096:
		default:
			return fmt.Errorf("%w: path MTU %d", ErrBadAttr, a.PathMTU)
		}
	}
	if mask&AttrDestQPN != 0 && a.DestQPN > 0xffffff {
		return fmt.Errorf("%w: dest QPN %#x", ErrBadAttr, a.DestQPN)
	}
	if mask&AttrRQPSN != 0 && a.RQPSN > 0xffffff {
		return fmt.Errorf("%w: rq_psn %#x", ErrBadAttr, a.RQPSN)
	}
	if mask&AttrSQPSN != 0 && a.SQPSN > 0xffffff {
		return fmt.Errorf("%w: sq_psn %#x", ErrBadAttr, a.SQPSN)
	}
	if mask&AttrTimeout != 0 && a.Timeout > 31 {
		return fmt.Errorf("%w: timeout %d", ErrBadAttr, a.Timeout)
	}
	if mask&AttrRetryCnt != 0 && a.RetryCnt > 7 {
		return fmt.Errorf("%w: retry_cnt %d", ErrBadAttr, a.RetryCnt)
	}
	if mask&AttrRNRRetry != 0 && a.RNRRetry > 7 {
		return fmt.Errorf("%w: rnr_retry %d", ErrBadAttr, a.RNRRetry)
	}
	if mask&AttrRetrans != 0 && a.Retrans&^(RetransFixed|RetransRetry7Forever|RetransSelective) != 0 {
		return fmt.Errorf("%w: retrans flags %#x", ErrBadAttr, uint8(a.Retrans))
	}
	if mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return fmt.Errorf("%w: min_rnr_timer %d", ErrBadAttr, a.MinRNRTimer)
	}
	if mask&AttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > MaxRdAtomic {
		return fmt.Errorf("%w: max_rd_atomic %d", ErrBadAttr, a.MaxRdAtomic)
	}
	if mask&AttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > MaxRdAtomic {
		return fmt.Errorf("%w: max_dest_rd_atomic %d", ErrBadAttr, a.MaxDestRdAtomic)
	}
	return nil
}
