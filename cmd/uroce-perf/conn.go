package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
// idleWait between turns instead, so an idle side costs no processor.
type drivingConn struct {
	net.Conn
	raw syscall.RawConn
	// drive runs the engine once; rx returns the device's received
	// packet count. Both are nil until the device is set up.
	drive func()
	rx    func() uint64
	// readFn is readOnce bound once, so the spinning Read allocates no
	// closure per turn; p, n and rerr are its argument and results.
	readFn func(fd uintptr) bool
	p      []byte
	n      int
	rerr   error
	// pollFn is pollOnce bound once, for the idle wait.
	pollFn func(fd uintptr)
	pfd    [1]unix.PollFd
}

const (
	quietIdle = 50 * time.Millisecond
	idleWait  = time.Millisecond
)

func newDrivingConn(c net.Conn) (*drivingConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return &drivingConn{Conn: c}, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("exchange connection: %w", err)
	}
	d := &drivingConn{Conn: c, raw: raw}
	d.readFn = d.readOnce
	d.pollFn = d.pollOnce
	return d, nil
}

// readOnce is one non-blocking read of the socket into p; it never waits,
// since the engine needs turns.
func (c *drivingConn) readOnce(fd uintptr) bool {
	c.n, c.rerr = syscall.Read(int(fd), c.p)
	return true
}

func (c *drivingConn) Read(p []byte) (int, error) {
	if c.drive == nil || c.raw == nil || len(p) == 0 {
		return c.Conn.Read(p)
	}
	lastRx, lastMove := c.rx(), time.Now()
	for spins := 1; ; spins++ {
		c.p = p
		if err := c.raw.Read(c.readFn); err != nil {
			c.p = nil
			return 0, err
		}
		n, rerr := c.n, c.rerr
		c.p = nil
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
		// Wait for the socket in poll(2), not in a Read with a
		// deadline: that one's timeout error is allocated each time,
		// a thousand a second while the peer computes its report.
		// The next turn reads what came.
		if err := c.raw.Control(c.pollFn); err != nil {
			return 0, err
		}
	}
}

// pollOnce waits up to idleWait for the socket to become readable.
func (c *drivingConn) pollOnce(fd uintptr) {
	c.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	unix.Poll(c.pfd[:], int(idleWait/time.Millisecond))
}
