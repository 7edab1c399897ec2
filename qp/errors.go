package qp

import "errors"

// Errors returned by the engine's control calls. A failed work request is
// not a Go error: it is a status in its Completion.
var (
	// ErrQueueFull means the send or receive queue has no free slot.
	ErrQueueFull = errors.New("queue full")
	// ErrBadState means the QP's state does not allow the call.
	ErrBadState = errors.New("invalid QP state")
	// ErrBadTransition means the requested state change is not one the
	// IBA allows from the current state.
	ErrBadTransition = errors.New("invalid QP state transition")
	// ErrMissingAttr means a transition lacks an attribute it requires.
	ErrMissingAttr = errors.New("missing required QP attribute")
	// ErrBadAttr means an attribute is out of range or not allowed in
	// the transition.
	ErrBadAttr = errors.New("invalid QP attribute")
	// ErrBadWR means a work request is malformed: unknown opcode, too
	// many SGEs, inline data too long or on a READ or atomic.
	ErrBadWR = errors.New("invalid work request")
	// ErrNoQP means no QP has that number.
	ErrNoQP = errors.New("no such QP")
	// ErrTooManyQPs means the engine's QP table is full.
	ErrTooManyQPs = errors.New("too many QPs")
	// ErrNoMR means no memory region has that key.
	ErrNoMR = errors.New("no such memory region")
	// ErrBadMR means a memory region cannot be registered as asked.
	ErrBadMR = errors.New("invalid memory region")
	// ErrHasSRQ means a receive WR was posted to a QP that takes its
	// receives from a shared receive queue: post it to the SRQ.
	ErrHasSRQ = errors.New("QP receives from a shared receive queue")
	// ErrBusy means the object is still in use (a CQ with QPs, an MR
	// table slot).
	ErrBusy = errors.New("resource busy")
)
