package rdmacm

import (
	"errors"
	"fmt"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// Errors. Test with errors.Is.
var (
	// ErrRejected means the peer refused the connection with a REJ; the
	// error is a *RejectError with the reason.
	ErrRejected = errors.New("connection rejected")
	// ErrRefused means nobody listens on the port (REJ "invalid service
	// ID", what rdma_cm reports as ECONNREFUSED). It comes with
	// ErrRejected.
	ErrRefused = errors.New("connection refused")
	// ErrUnreachable means the peer never answered: every retry of the
	// REQ (or of the REP) went unanswered (RDMA_CM_EVENT_UNREACHABLE).
	ErrUnreachable = errors.New("peer unreachable")
	// ErrTimeout means the caller's context expired first; it comes with
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("connection timed out")
	// ErrCanceled means the caller's context was cancelled first; it
	// comes with context.Canceled.
	ErrCanceled = errors.New("connection canceled")
	// ErrConnect means a local failure while connecting: moving the QP to
	// RTR or RTS failed (RDMA_CM_EVENT_CONNECT_ERROR).
	ErrConnect = errors.New("connection setup failed")
	// ErrClosed means the CM (or its device) was closed.
	ErrClosed = errors.New("rdmacm closed")
	// ErrPortInUse means Listen was called twice for a port.
	ErrPortInUse = errors.New("port already listened on")
	// ErrBadParam means a parameter is out of range: too much private
	// data, a QP of another device or in the wrong state, an address of
	// another family.
	ErrBadParam = errors.New("invalid parameter")
	// ErrBadState means the call is not valid now: accepting a request
	// twice, disconnecting what is not connected.
	ErrBadState = errors.New("invalid in this state")
)

// RejectError is the REJ a peer answered with.
type RejectError struct {
	Reason mad.RejectReason
	// PrivateData is the REJ's private data, the whole 148-byte field
	// (rdma_reject's data first).
	PrivateData []byte
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("%v: %v", ErrRejected, e.Reason)
}

// Is makes errors.Is(err, ErrRejected) true, and ErrRefused for "invalid
// service ID".
func (e *RejectError) Is(target error) bool {
	return target == ErrRejected || target == ErrRefused && e.Reason == mad.RejInvalidServiceID
}
