package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// drivingConn is the exchange's TCP connection that keeps the local
// transport engine running while the exchange waits for the peer. The
// engine runs inline (the measuring goroutine drives it), so a side
// blocked in a handshake would otherwise stop answering its peer: the
// passive server of read_lat or write_bw is in a handshake for the whole
// test, as perftest's is while its RNIC serves the reads.
//
// While packets flow, Read spins: a non-blocking read of the socket, then
// one turn of the engine, as perftest's peer has an RNIC that answers at
// once. After quietIdle without a packet it waits in the kernel for up to
// a millisecond between turns instead, so an idle side costs no processor.
type drivingConn struct {
	net.Conn
	raw syscall.RawConn
	// drive runs the engine once; rx returns the device's received
	// packet count. Both are nil until the device is set up.
	drive func()
	rx    func() uint64
}

const quietIdle = 50 * time.Millisecond

func newDrivingConn(c net.Conn) (*drivingConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return &drivingConn{Conn: c}, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("exchange connection: %w", err)
	}
	return &drivingConn{Conn: c, raw: raw}, nil
}

func (c *drivingConn) Read(p []byte) (int, error) {
	if c.drive == nil || c.raw == nil || len(p) == 0 {
		return c.Conn.Read(p)
	}
	lastRx, lastMove := c.rx(), time.Now()
	for spins := 1; ; spins++ {
		var n int
		var rerr error
		if err := c.raw.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), p)
			return true // never wait here: the engine needs turns
		}); err != nil {
			return 0, err
		}
		switch {
		case rerr == nil && n == 0:
			return 0, io.EOF
		case rerr == nil:
			return n, nil
		case !errors.Is(rerr, syscall.EAGAIN):
			return 0, rerr
		}
		c.drive()
		if spins&63 != 0 {
			continue
		}
		runtime.Gosched()
		if rx := c.rx(); rx != lastRx {
			lastRx, lastMove = rx, time.Now()
			continue
		}
		if time.Since(lastMove) < quietIdle {
			continue
		}
		c.Conn.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, err := c.Conn.Read(p)
		c.Conn.SetReadDeadline(time.Time{})
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
	}
}
