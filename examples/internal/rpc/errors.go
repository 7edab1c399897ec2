package rpc

import (
	"errors"
	"strconv"

	"github.com/uroce/uroce/verbs"
)

var (
	// ErrClosed means the client or server was closed.
	ErrClosed = errors.New("rpc closed")
	// ErrTooLarge means a request or reply exceeds Config.MaxMsg.
	ErrTooLarge = errors.New("message too large")
	// ErrShortBuffer means a reply did not fit the caller's buffer; the
	// buffer holds its first bytes.
	ErrShortBuffer = errors.New("reply longer than buffer")
	// ErrBroken means the connection failed: a work request completed with
	// an error status (its cause is wrapped in the error returned) and the
	// QP is in the error state.
	ErrBroken = errors.New("connection broken")
	// ErrTooManyConns means a server has Config.MaxConns connections.
	ErrTooManyConns = errors.New("too many connections")
)

// StatusError is a non-zero status a handler returned for a request.
type StatusError uint16

func (e StatusError) Error() string { return "rpc status " + strconv.Itoa(int(e)) }

// WCError is a failed work completion's status, wrapped with ErrBroken.
type WCError struct{ Status verbs.WCStatus }

func (e WCError) Error() string { return "work completion: " + e.Status.String() }
