package verbs

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/qp"
)

// maxReqHeaders is the largest request header with payload: BTH, RETH and
// ImmDt, plus the ICRC.
const maxReqHeaders = 12 + 16 + 4 + 4

// Device is one RoCEv2 port: a link and the transport engine that owns
// every QP on it (ibv_context).
type Device struct {
	mu     sync.Mutex
	l      link.Link
	e      *qp.Engine
	rx     [64]*link.Packet
	closed bool
	nextPD uint32
	bgStop chan struct{}
	bgDone chan struct{}
	// clock is the device's time source; tests over a pipe with a fake
	// clock replace it.
	clock func() time.Time
}

// Open makes a device over a link, which it owns from now on.
func Open(l link.Link) *Device {
	return &Device{l: l, e: qp.NewEngine(l), clock: time.Now}
}

// OpenAddr opens a device on a local IP address with the kernel UDP
// backend (unprivileged).
func OpenAddr(addr netip.Addr) (*Device, error) {
	l, err := udp.Open(udp.Config{Addr: addr})
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", addr, err)
	}
	return Open(l), nil
}

// OpenInterface opens a device on the first IPv4 (else IPv6 global)
// address of a network interface, with the UDP backend. It returns
// ErrNoAddr when the interface has none.
func OpenInterface(name string) (*Device, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	var pick netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := p.Addr()
		if ip.Is4() {
			pick = ip
			break
		}
		if !pick.IsValid() && ip.IsGlobalUnicast() {
			pick = ip
		}
	}
	if !pick.IsValid() {
		return nil, fmt.Errorf("open %s: %w", name, ErrNoAddr)
	}
	return OpenAddr(pick)
}

// SetClock replaces the device's time source (for simulations with a fake
// clock). Call it before any traffic.
func (d *Device) SetClock(now func() time.Time) { d.clock = now }

// Link returns the device's link.
func (d *Device) Link() link.Link { return d.l }

// GIDs lists the device's GIDs: for RoCEv2 the local address, IPv4 in its
// IPv4-mapped IPv6 form (rxe's GID table holds the same).
func (d *Device) GIDs() []netip.Addr {
	a := d.l.Info().Addr
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	return []netip.Addr{a}
}

// Addr returns the address peers send to.
func (d *Device) Addr() netip.Addr { return d.l.Info().Addr.Unmap() }

// MaxPathMTU returns the largest path MTU the link carries.
func (d *Device) MaxPathMTU() int {
	room := d.l.Info().MaxRoCE() - maxReqHeaders
	for _, m := range []int{4096, 2048, 1024, 512, 256} {
		if m <= room {
			return m
		}
	}
	return 0
}

// Counters returns the device's counters, summed over its QPs.
func (d *Device) Counters() Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.e.Stats()
}

// drive feeds received packets to the engine and runs its timers and
// requesters; d.mu is held.
func (d *Device) drive() {
	now := d.clock()
	for {
		n, _ := d.l.Recv(d.rx[:])
		if n == 0 {
			break
		}
		d.e.Receive(now, d.rx[:n])
		d.l.Release(d.rx[:n])
		if n < len(d.rx) {
			break
		}
	}
	d.e.Process(now)
}

// waitTime is how long the link may sleep: until the next timer, at most
// limit; d.mu is held.
func (d *Device) waitTime(limit time.Duration) time.Duration {
	if d.e.Busy() {
		return 0
	}
	if t, ok := d.e.NextDeadline(); ok {
		if w := t.Sub(d.clock()); w < limit {
			return max(w, 0)
		}
	}
	return limit
}

// Start drives the engine from a background goroutine until Close, for
// applications that block in Wait rather than poll.
func (d *Device) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bgStop != nil || d.closed {
		return
	}
	d.bgStop, d.bgDone = make(chan struct{}), make(chan struct{})
	go d.loop(d.bgStop, d.bgDone)
}

func (d *Device) loop(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		default:
		}
		d.mu.Lock()
		d.drive()
		w := d.waitTime(10 * time.Millisecond)
		d.mu.Unlock()
		if w > 0 {
			if err := d.l.Wait(w); err != nil {
				return
			}
		}
	}
}

// Close stops the background goroutine and closes the link.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	stop, done := d.bgStop, d.bgDone
	d.mu.Unlock()
	err := d.l.Close()
	if stop != nil {
		close(stop)
		<-done
	}
	return err
}

// PD is a protection domain (ibv_pd): MRs and QPs of one PD work together.
type PD struct {
	d  *Device
	id uint32
}

// AllocPD makes a protection domain.
func (d *Device) AllocPD() *PD {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextPD++
	return &PD{d: d, id: d.nextPD}
}

// MR is a registered memory region (ibv_mr).
type MR struct {
	pd *PD
	m  *qp.MR
}

// RegMR registers buf with the access flags: O(1), no page pinning; the MR
// keeps buf alive until Dereg. Its address is buf's own, so a peer can be
// given &buf[i] as a remote address. It returns an error wrapping
// qp.ErrBadMR for remote write or atomic access without local write.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	pd.d.mu.Lock()
	defer pd.d.mu.Unlock()
	m, err := pd.d.e.MRs.Register(pd.id, buf, addrOf(buf), access)
	if err != nil {
		return nil, fmt.Errorf("reg MR: %w", err)
	}
	return &MR{pd: pd, m: m}, nil
}

// Dereg removes the region: its keys stop working at once.
func (m *MR) Dereg() error {
	m.pd.d.mu.Lock()
	defer m.pd.d.mu.Unlock()
	return m.pd.d.e.MRs.Deregister(m.m.LKey)
}

// Addr, LKey, RKey and Buf describe the region.
func (m *MR) Addr() uint64 { return m.m.Addr }
func (m *MR) LKey() uint32 { return m.m.LKey }
func (m *MR) RKey() uint32 { return m.m.RKey }
func (m *MR) Buf() []byte  { return m.m.Buf }

// SGE returns the scatter/gather element for [off, off+n) of the region.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.m.Addr + uint64(off), Length: uint32(n), LKey: m.m.LKey}
}

// CQ is a completion queue (ibv_cq).
type CQ struct {
	d      *Device
	c      *qp.CQ
	notify chan struct{}
}

// CreateCQ makes a completion queue for at least n completions.
func (d *Device) CreateCQ(n int) *CQ {
	cq := &CQ{d: d, c: qp.NewCQ(n), notify: make(chan struct{}, 1)}
	cq.c.OnComplete = cq.signal
	return cq
}

func (c *CQ) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Notify returns a channel that receives a value after completions arrive
// (a completion channel that is always armed; drain with Poll).
func (c *CQ) Notify() <-chan struct{} { return c.notify }

// Poll moves completions into wc and returns how many (ibv_poll_cq). In
// inline mode it first drives the engine: reads the link, runs timers.
func (c *CQ) Poll(wc []WC) int {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.d.bgStop == nil && !c.d.closed {
		c.d.drive()
	}
	return c.c.Poll(wc)
}

// Wait blocks until at least one completion is in wc or ctx is done, and
// returns how many it moved, or the context's error.
func (c *CQ) Wait(ctx context.Context, wc []WC) (int, error) {
	for {
		if n := c.Poll(wc); n > 0 {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c.d.mu.Lock()
		if c.d.closed {
			c.d.mu.Unlock()
			return 0, ErrClosed
		}
		inline := c.d.bgStop == nil
		w := c.d.waitTime(time.Millisecond)
		c.d.mu.Unlock()
		if !inline {
			select {
			case <-c.notify:
			case <-ctx.Done():
			}
			continue
		}
		if w > 0 {
			if err := c.d.l.Wait(w); err != nil {
				return 0, fmt.Errorf("wait: %w", err)
			}
		}
	}
}

// Overflowed reports whether a completion was lost for lack of room.
func (c *CQ) Overflowed() bool {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.c.Overflowed
}

// Destroy releases the CQ; it returns ErrBusy while a QP uses it.
func (c *CQ) Destroy() error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.d.e.CQInUse(c.c) {
		return fmt.Errorf("destroy CQ: %w", ErrBusy)
	}
	return nil
}
