package sock

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/mmsg"
	"github.com/uroce/uroce/pkg/link/internal/pool"
	"github.com/uroce/uroce/pkg/link/internal/waiter"
	"golang.org/x/sys/unix"
)

// Config sizes a Conn.
type Config struct {
	// Name prefixes error context: "udp", "afpacket".
	Name string
	// FD is the socket, non-blocking.
	FD int
	// V6 is the socket's address family: IPv6, or IPv4.
	V6 bool
	// Batch is the most messages one system call moves.
	Batch int
	// Buffers and BufSize size the pool.
	Buffers, BufSize int
	// TxCtrl and RxCtrl are the control space per message.
	TxCtrl, RxCtrl int
	// RxAt is where in a buffer a received datagram lands.
	RxAt int
}

// Conn is the shared state. Its methods are the owner's, apart from Close.
type Conn struct {
	Pool  *pool.Pool
	W     *waiter.Waiter
	TX    *mmsg.Batch
	RX    *mmsg.Batch
	Stats link.Stats

	name      string
	fd        int
	v6        bool
	rxAt      int
	tx, rx    []*link.Packet
	errClosed error
	errFull   error
	errTooBig error
	errFamily error
	errShort  error

	// rxWant is how many messages the next recvmmsg asks for, rxLast how
	// many the last one got. recvmmsg returns early only when the queue
	// runs dry, after one more try that costs the kernel a message header
	// and a queue check (about 190 ns a receive here, 380 ns of a
	// ping-pong's round trip). So the ask follows the traffic: it drops
	// to what a call found when that call drained the queue, and doubles
	// when calls in a row fill it (a backlog; a lone packet after an
	// empty poll is a ping-pong's and leaves it as it is).
	rxWant, rxLast int
}

// PollOutWait bounds how long Send waits for room in a full socket buffer
// before it drops the rest of the batch.
const PollOutWait = 100 * time.Millisecond

// Init sets the Conn up for a socket that is already open.
func (c *Conn) Init(cfg Config) error {
	w, err := waiter.New(cfg.FD)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Name, err)
	}
	*c = Conn{
		Pool: pool.New(cfg.Buffers, cfg.BufSize), W: w,
		TX: mmsg.New(cfg.Batch, cfg.TxCtrl), RX: mmsg.New(cfg.Batch, cfg.RxCtrl),
		name: cfg.Name, fd: cfg.FD, v6: cfg.V6, rxAt: cfg.RxAt,
		tx: make([]*link.Packet, cfg.Batch), rx: make([]*link.Packet, cfg.Batch),
		errClosed: fmt.Errorf("%s: %w", cfg.Name, link.ErrClosed),
		errFull:   fmt.Errorf("%s: send buffer full: %w", cfg.Name, unix.EAGAIN),
		errTooBig: fmt.Errorf("%s: %w", cfg.Name, link.ErrTooBig),
		errFamily: fmt.Errorf("%s: destination of the other address family: %w", cfg.Name, link.ErrNoRoute),
		errShort:  errors.New(cfg.Name + ": packet shorter than BTH and ICRC"),
	}
	return nil
}

// ErrClosed is link.ErrClosed with the backend's context.
func (c *Conn) ErrClosed() error { return c.errClosed }

// ErrTooBig is link.ErrTooBig with the backend's context, for a packet
// that does not fit the MTU or its buffer's headroom.
func (c *Conn) ErrTooBig() error { return c.errTooBig }

// Dst returns p's destination, unmapped, after the checks every stage
// starts with: an address of the socket's family, and a RoCE packet at
// least a BTH and an ICRC long. Its errors are built once, in Init: it
// runs for every packet sent.
func (c *Conn) Dst(p *link.Packet) (netip.Addr, error) {
	dst := p.Remote.Unmap()
	if dst.Is6() != c.v6 || !dst.IsValid() {
		return dst, c.errFamily
	}
	if p.Len < bth.BTHLen+bth.ICRCLen {
		return dst, c.errShort
	}
	return dst, nil
}

// Alloc implements link.Link.Alloc.
func (c *Conn) Alloc(pkts []*link.Packet) int {
	if !c.W.Enter() {
		return 0
	}
	n := c.Pool.Alloc(pkts)
	c.W.Exit()
	return n
}

// Release implements link.Link.Release. After Close the buffers are
// already gone; the caller's references are cleared all the same.
func (c *Conn) Release(pkts []*link.Packet) {
	if !c.W.Enter() {
		clear(pkts)
		return
	}
	c.Pool.Release(pkts)
	c.W.Exit()
}

// Send implements link.Link.Send. stage writes packet p for slot n of TX
// (SetBuf and the address, control messages if any) or returns why p is
// dropped.
func (c *Conn) Send(pkts []*link.Packet, stage func(n int, p *link.Packet) error) (int, error) {
	if !c.W.Enter() {
		c.Stats.TxDropped += uint64(len(pkts))
		clear(pkts)
		return 0, c.errClosed
	}
	defer c.W.Exit()
	return pool.Split(pkts, c.TX.Cap(), func(pkts []*link.Packet) (int, error) {
		return c.sendBatch(pkts, stage)
	})
}

func (c *Conn) drop(p *link.Packet, err error, first *error) {
	c.Stats.TxDropped++
	c.Pool.Put(p)
	if *first == nil {
		*first = err
	}
}

func (c *Conn) sendBatch(pkts []*link.Packet, stage func(int, *link.Packet) error) (int, error) {
	var first error
	n := 0
	for i, p := range pkts {
		pkts[i] = nil
		if err := stage(n, p); err != nil {
			c.drop(p, err, &first)
			continue
		}
		c.tx[n] = p
		n++
	}
	sent := 0
	for i := 0; i < n; {
		m, err := c.TX.Send(c.fd, i, n)
		switch {
		case err != nil:
			// The message at i failed (EMSGSIZE, ENETUNREACH, ...):
			// drop it and go on with the rest.
			c.drop(c.tx[i], fmt.Errorf("%s: sendmmsg: %w", c.name, err), &first)
			c.tx[i] = nil
			i++
		case m == 0:
			if !c.W.PollOut(PollOutWait) {
				for ; i < n; i++ {
					c.drop(c.tx[i], c.errFull, &first)
					c.tx[i] = nil
				}
			}
		default:
			for _, p := range c.tx[i : i+m] {
				c.Stats.TxPackets++
				c.Stats.TxBytes += uint64(p.Len)
				c.Pool.Put(p)
			}
			clear(c.tx[i : i+m])
			sent += m
			i += m
		}
	}
	return sent, first
}

// Recv implements link.Link.Recv. accept checks the datagram in RX slot i,
// which landed in p.Buf at RxAt, and fills p; false leaves the buffer
// posted.
func (c *Conn) Recv(pkts []*link.Packet, accept func(i int, p *link.Packet) bool) (int, error) {
	if !c.W.Enter() {
		return 0, c.errClosed
	}
	defer c.W.Exit()
	want := min(len(pkts), c.RX.Cap(), max(c.rxWant, 1))
	for i := range want {
		if c.rx[i] == nil {
			p := c.Pool.Get()
			if p == nil {
				want = i
				break
			}
			c.rx[i] = p
			c.RX.SetBuf(i, p.Buf[c.rxAt:])
		}
	}
	if want == 0 {
		return 0, nil
	}
	m, err := c.RX.Recv(c.fd, want)
	if err != nil {
		return 0, fmt.Errorf("%s: recvmmsg: %w", c.name, err)
	}
	switch {
	case m == want && c.rxLast > 0:
		c.rxWant = min(2*want, c.RX.Cap())
	case m > 0 && m < want:
		c.rxWant = m
	}
	c.rxLast = m
	out := 0
	for i := range m {
		if p := c.rx[i]; accept(i, p) {
			c.rx[i] = nil
			pkts[out] = p
			out++
		}
	}
	return out, nil
}

// Wait implements link.Link.Wait.
func (c *Conn) Wait(timeout time.Duration) error {
	if !c.W.Enter() {
		return c.errClosed
	}
	closed, err := c.W.Wait(timeout)
	c.W.Exit()
	if closed {
		return c.errClosed
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// Wake implements link.Waker.
func (c *Conn) Wake() { c.W.Wake() }

// Close fences the owner, then runs free (the backend's own resources;
// the socket is the backend's to close) and frees the Conn's.
func (c *Conn) Close(free func()) {
	c.W.Close(func() {
		free()
		c.Free()
	})
}

// Free drops the buffers and closes the eventfd; for a Conn that never
// opened fully, or from Close.
func (c *Conn) Free() {
	if c.W != nil {
		c.W.Free()
	}
	c.Pool, c.tx, c.rx = nil, nil, nil
}
