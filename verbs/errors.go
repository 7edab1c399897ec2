package verbs

import (
	"errors"
	"fmt"

	"github.com/uroce/uroce/qp"
)

// Errors returned by the API; errors from the engine are wrapped and match
// the qp sentinels re-exported here.
var (
	// ErrClosed means the device is closed.
	ErrClosed = errors.New("device closed")
	// ErrMTU means a path MTU that the link cannot carry.
	ErrMTU = errors.New("path MTU exceeds the link MTU")
	// ErrNoAddr means no usable local address was found for a device.
	ErrNoAddr = errors.New("no usable local address")
	// ErrWrongDevice means objects of different devices or PDs were mixed.
	ErrWrongDevice = errors.New("object belongs to another device or PD")

	ErrQueueFull     = qp.ErrQueueFull
	ErrBadState      = qp.ErrBadState
	ErrBadTransition = qp.ErrBadTransition
	ErrMissingAttr   = qp.ErrMissingAttr
	ErrBadAttr       = qp.ErrBadAttr
	ErrBadWR         = qp.ErrBadWR
	ErrBusy          = qp.ErrBusy
	ErrHasSRQ        = qp.ErrHasSRQ
)

// Wrapped once, up front: the post calls return them on their hot path.
var (
	errSendClosed = fmt.Errorf("post send: %w", ErrClosed)
	errRecvClosed = fmt.Errorf("post recv: %w", ErrClosed)
)
