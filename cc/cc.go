package cc

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned when building an Algorithm. They are wrapped with detail;
// test for them with errors.Is.
var (
	// ErrUnknownKind means the algorithm name or Kind is not one this
	// package has.
	ErrUnknownKind = errors.New("unknown congestion control algorithm")
	// ErrBadParams means a parameter is out of its range.
	ErrBadParams = errors.New("bad congestion control parameters")
	// ErrNoINT means the algorithm needs in-band network telemetry (HPCC)
	// and the QP's path delivers none: RoCEv2 has no INT field, rxe and
	// ConnectX carry none, and uroce has no INT-capable switch to read.
	ErrNoINT = errors.New("congestion control needs in-band network telemetry, which this path does not carry")
)

// Algorithm is the congestion control of one QP, shaped like quic-go's
// SendAlgorithm: events in, with the time passed in; rate and window out.
// The engine calls it from the loop that owns the QP; it is not safe for
// concurrent use. No method allocates.
type Algorithm interface {
	// OnSent records that the requester put n bytes on the wire:
	// every data packet, retransmissions included (DCQCN's byte counter
	// counts what was transmitted).
	OnSent(now time.Time, n int)
	// OnAck records that an ACK (or READ response) acknowledged n new
	// bytes. rtt is the time from the requester's send of the newest
	// acknowledged packet to this ACK, or 0 when there is no valid sample
	// (the packet was retransmitted: Karn's rule).
	OnAck(now time.Time, n int, rtt time.Duration)
	// OnCNP records a CNP received for this QP (reaction point).
	OnCNP(now time.Time)
	// OnCE records a CE-marked packet received for this QP (notification
	// point) and reports whether to send a CNP to the peer QP now.
	OnCE(now time.Time) bool
	// OnLoss records a retransmission timeout or a NAK sequence error.
	OnLoss(now time.Time)
	// OnTimer runs the timers due at or before now. Calling it early or
	// more often than needed is harmless.
	OnTimer(now time.Time)
	// NextTimer returns when OnTimer next has work, or the zero Time when
	// no timer is armed. It changes after any event; the engine re-reads
	// it after each call and re-arms its timer wheel.
	NextTimer() time.Time
	// Rate returns the rate to pace at, in [min rate, line rate].
	Rate() Rate
	// Window returns the bytes allowed in flight, or 0 for no window
	// (rate-based schemes).
	Window() int
	// Stats returns a snapshot of the counters and state as of now.
	Stats(now time.Time) Stats
}

// Kind names an algorithm; a QP attribute selects it, with a device default.
type Kind uint8

// Algorithms.
const (
	KindNone Kind = iota
	KindDCQCN
	KindTIMELY
	KindSwift
	KindHPCC
	numKinds
)

var kindNames = [numKinds]string{"none", "dcqcn", "timely", "swift", "hpcc"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind returns the Kind named s ("none", "dcqcn", "timely", "swift",
// "hpcc").
// It returns an error wrapping ErrUnknownKind otherwise.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("parse %q: %w", s, ErrUnknownKind)
}

// Config selects and parameterises the algorithm of one QP. Only the
// parameters of the selected Kind, and NP, are used.
type Config struct {
	Kind Kind
	// LineRate is the port's rate: the highest rate any algorithm
	// answers, and where flows start.
	LineRate Rate
	NP       NPParams
	DCQCN    DCQCNParams
	TIMELY   TIMELYParams
	Swift    SwiftParams
	HPCC     HPCCParams
}

// DefaultConfig returns the configuration of kind at line rate with every
// algorithm's defaults: ConnectX firmware's for DCQCN and the notification
// point, NS3TIMELY(line) for TIMELY (the paper's rule scaled to the line
// rate, as the HPCC authors' ns-3 runs it), the papers' for Swift and HPCC.
func DefaultConfig(kind Kind, line Rate) Config {
	return Config{
		Kind:     kind,
		LineRate: line,
		NP:       FirmwareNP(),
		DCQCN:    FirmwareDCQCN(),
		TIMELY:   NS3TIMELY(line),
		Swift:    DefaultSwift(),
		HPCC:     PaperHPCC(),
	}
}

// New returns the algorithm cfg selects. Every algorithm starts unlimited,
// at the line rate, with no timer armed, so none needs a start time: the
// first event brings one. It returns an error wrapping ErrUnknownKind or
// ErrBadParams, and for KindHPCC, once its parameters check, ErrNoINT:
// New builds the algorithm of a QP whose ACKs carry no telemetry, and
// HPCC without it would run blind at line rate. A caller with an INT
// source (the simulator) uses NewHPCC and INTAlgorithm.OnINT.
func New(cfg *Config) (Algorithm, error) {
	if cfg.LineRate == 0 {
		return nil, fmt.Errorf("new %v: zero line rate: %w", cfg.Kind, ErrBadParams)
	}
	switch cfg.Kind {
	case KindNone:
		return NewNone(cfg.LineRate, cfg.NP), nil
	case KindDCQCN:
		return NewDCQCN(cfg.DCQCN, cfg.NP, cfg.LineRate)
	case KindTIMELY:
		return NewTIMELY(cfg.TIMELY, cfg.NP, cfg.LineRate)
	case KindSwift:
		return NewSwift(cfg.Swift, cfg.NP, cfg.LineRate)
	case KindHPCC:
		if err := cfg.HPCC.check(cfg.LineRate); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("new hpcc: %w", ErrNoINT)
	}
	return nil, fmt.Errorf("new: %w", ErrUnknownKind)
}

// None never slows down: it answers the line rate and no window, and
// ignores CNPs (counting them in RPCNPIgnored). It still acts as the
// notification point. Its answers never change and OnSent, OnAck, OnLoss
// and OnTimer do nothing, so an engine may leave out those calls.
type None struct {
	line Rate
	np   NP
	ctr  Counters
}

var _ Algorithm = (*None)(nil)

// NewNone returns the "none" algorithm.
func NewNone(line Rate, np NPParams) *None { return &None{line: line, np: NewNP(np)} }

func (a *None) OnSent(time.Time, int)               {}
func (a *None) OnAck(time.Time, int, time.Duration) {}
func (a *None) OnCNP(time.Time)                     { a.ctr.RPCNPIgnored++ }
func (a *None) OnCE(now time.Time) bool             { return a.np.OnCE(now, &a.ctr) }
func (a *None) OnLoss(time.Time)                    {}
func (a *None) OnTimer(time.Time)                   {}
func (a *None) NextTimer() time.Time                { return time.Time{} }
func (a *None) Rate() Rate                          { return a.line }
func (a *None) Window() int                         { return 0 }
func (a *None) Stats(time.Time) Stats {
	return Stats{Counters: a.ctr, Kind: KindNone, Rate: a.line, TargetRate: a.line}
}
