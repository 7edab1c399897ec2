package pingdest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
)

// Config says where the exchange runs.
type Config struct {
	Peer string // the server's host; empty on the server
	Port int    // TCP port (the programs' -p, 18515 by default)

	// Listener, if set, is accepted on instead of listening on Port (for
	// tests).
	Listener net.Listener

	// Timeout bounds the exchange once the TCP connection is up (0:
	// ExchangeTimeout): a peer that is not the program expected, and
	// never sends its address, ends in ErrExchangeTimeout rather than a
	// wait forever. Waiting for a client to connect is not bounded.
	Timeout time.Duration
}

// ExchangeTimeout is the default Config.Timeout.
const ExchangeTimeout = 10 * time.Second

// ErrExchangeTimeout is the error of an exchange whose peer did not finish
// it in time.
var ErrExchangeTimeout = errors.New("address exchange timed out")

// Exchange runs the TCP exchange, as the client (c.Peer set) or the
// server, and returns the peer's address. connect is the server's step
// between reading and writing (see Server); the client connects after
// Exchange returns. Cancelling ctx closes the connection.
func Exchange(ctx context.Context, c Config, local Dest, connect func(remote Dest) error) (Dest, error) {
	port := strconv.Itoa(c.Port)
	if c.Peer != "" {
		var dl net.Dialer
		conn, err := dl.DialContext(ctx, "tcp", net.JoinHostPort(c.Peer, port))
		if err != nil {
			return Dest{}, fmt.Errorf("couldn't connect to %s:%s: %w", c.Peer, port, err)
		}
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		return c.bounded(conn, func() (Dest, error) { return Client(conn, local) })
	}
	ln := c.Listener
	if ln == nil {
		var lc net.ListenConfig
		var err error
		// Every address, as the programs' AI_PASSIVE bind.
		if ln, err = lc.Listen(ctx, "tcp", ":"+port); err != nil {
			return Dest{}, fmt.Errorf("couldn't listen to port %s: %w", port, err)
		}
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		return Dest{}, fmt.Errorf("accept: %w", err)
	}
	defer conn.Close()
	stopc := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopc()
	return c.bounded(conn, func() (Dest, error) { return Server(conn, local, connect) })
}

// bounded runs one side of the exchange on conn under c's timeout, and
// names a peer that ran out of it.
func (c Config) bounded(conn net.Conn, side func() (Dest, error)) (Dest, error) {
	to := c.Timeout
	if to <= 0 {
		to = ExchangeTimeout
	}
	if err := conn.SetDeadline(time.Now().Add(to)); err != nil {
		return Dest{}, err
	}
	d, err := side()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Dest{}, fmt.Errorf("%w: %v sent no pingpong address within %v (is it ibv_*_pingpong on port %d?): %v",
			ErrExchangeTimeout, conn.RemoteAddr(), to, c.Port, err)
	}
	return d, err
}

// Client is the client's half of the exchange: write our message, read the
// server's, write "done". The server is ready for our first send (an RC
// QP in RTR, a UD address handle) by the time its message arrives.
func Client(rw io.ReadWriter, local Dest) (Dest, error) {
	m := local.Marshal()
	if _, err := rw.Write(m[:]); err != nil {
		return Dest{}, fmt.Errorf("send local address: %w", err)
	}
	if _, err := io.ReadFull(rw, m[:]); err != nil {
		return Dest{}, fmt.Errorf("read remote address: %w", err)
	}
	remote, err := Parse(m[:])
	if err != nil {
		return Dest{}, err
	}
	if _, err := rw.Write(Done); err != nil {
		return Dest{}, fmt.Errorf("send done: %w", err)
	}
	return remote, nil
}

// Server is the server's half: read the client's message, connect (so
// that the client's first send finds us ready), then write our message and
// read the client's "done".
func Server(rw io.ReadWriter, local Dest, connect func(remote Dest) error) (Dest, error) {
	var m [MsgSize]byte
	if _, err := io.ReadFull(rw, m[:]); err != nil {
		return Dest{}, fmt.Errorf("read remote address: %w", err)
	}
	remote, err := Parse(m[:])
	if err != nil {
		return Dest{}, err
	}
	if err := connect(remote); err != nil {
		return Dest{}, err
	}
	m = local.Marshal()
	if _, err := rw.Write(m[:]); err != nil {
		return Dest{}, fmt.Errorf("send local address: %w", err)
	}
	var d [len("done\x00")]byte
	if _, err := io.ReadFull(rw, d[:]); err != nil {
		return Dest{}, fmt.Errorf("read done: %w", err)
	}
	return remote, nil
}

// Summary prints the programs' closing lines: the bytes both ways and the
// iterations, with the rate and the time an iteration took.
func Summary(out io.Writer, size, iters int, elapsed time.Duration) {
	usec := float64(elapsed.Microseconds())
	bytes := float64(size) * float64(iters) * 2
	fmt.Fprintf(out, "%.0f bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, bytes*8/usec)
	fmt.Fprintf(out, "%d iters in %.2f seconds = %.2f usec/iter\n", iters, usec/1e6, usec/float64(iters))
}

// ParseArgs parses the programs' command line with fs: flags, then at
// most one argument, the server's host (none: be the server). It sets
// fs's usage to the programs' two forms.
func ParseArgs(fs *flag.FlagSet, args []string) (peer string, err error) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage:\n  %[1]s [flags]         start a server and wait for connection\n  %[1]s [flags] <host>  connect to server at <host>\n", fs.Name())
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return "", err
	}
	switch fs.NArg() {
	case 0:
		return "", nil
	case 1:
		return fs.Arg(0), nil
	default:
		fs.Usage()
		return "", errors.New("more than one host")
	}
}
