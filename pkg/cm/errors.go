package cm

import "errors"

// Errors. Methods wrap them with short context; test with errors.Is.
var (
	// ErrBadState means the call is not valid in the connection's state,
	// e.g. Accept after the REP was sent or Disconnect before
	// establishment.
	ErrBadState = errors.New("invalid in this connection state")
	// ErrBadParam means a parameter is out of range: a QPN over 24 bits,
	// a reserved MTU code, too much private data.
	ErrBadParam = errors.New("invalid parameter")
	// ErrServiceInUse means Listen was called twice for a service ID.
	ErrServiceInUse = errors.New("service ID already listened on")
	// ErrMalformed means a received MAD is not a CM message this package
	// reads; it wraps the mad package's error.
	ErrMalformed = errors.New("malformed CM MAD")
	// ErrUnknownConn means a received message names no connection this
	// manager has (or the wrong peer communication ID for it).
	ErrUnknownConn = errors.New("unknown connection")
	// ErrUnexpected means a received message is not valid in the state of
	// the connection it names; it was dropped (IBA 12.9: "discard").
	ErrUnexpected = errors.New("unexpected CM message")
	// ErrUnsupported means a valid message this manager does not act on
	// (APR).
	ErrUnsupported = errors.New("unsupported CM message")
)
