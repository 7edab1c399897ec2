package rsocket

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// Errors. Every error a Conn or Listener method returns is a *net.OpError
// (so a net.Error) wrapping one of these, or os.ErrDeadlineExceeded for a
// deadline that passed (Timeout reports true), or net.ErrClosed after
// Close. Test with errors.Is.
var (
	// ErrReset means the peer disconnected, or the connection failed,
	// while this side still wanted to write (ECONNRESET in rsend).
	ErrReset = syscall.ECONNRESET
	// ErrShutdown means Write after CloseWrite (EPIPE).
	ErrShutdown = syscall.EPIPE
	// ErrProtocol means the peer's connect message was not rsocket's.
	ErrProtocol = errors.New("rsocket: peer does not speak rsocket")
	// ErrShort and ErrVersion are ParseConnData's: private data too
	// short for a connect message, or not version 1.
	ErrShort   = errors.New("rsocket: connect message too short")
	ErrVersion = errors.New("rsocket: unsupported connect message version")
	// ErrNoIOMap means IOMap found no free slot in the peer's iomap
	// table, or the peer offers none.
	ErrNoIOMap = errors.New("rsocket: no free slot in the peer's iomap table")
	// ErrNotMapped means IOWrite's offset is in no region the peer
	// mapped (riowrite writes nothing then), or IOUnmap's buffer is not
	// mapped.
	ErrNotMapped = errors.New("rsocket: offset not mapped by the peer")
)

// opError wraps err for op on c as the net package does.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: network, Source: c.laddr, Addr: c.raddr, Err: err}
}

var errDeadline = os.ErrDeadlineExceeded
