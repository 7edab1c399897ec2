package verbs

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/uroce/uroce/qp"
)

// maxReqHeaders is the largest request header with payload: BTH, RETH and
// ImmDt, plus the ICRC.
const maxReqHeaders = bth.BTHLen + bth.RETHLen + bth.ImmDtLen + bth.ICRCLen

// Device is one RoCEv2 port: a link and the transport engine that owns
// every QP on it (ibv_context). Its methods, and those of its PDs, MRs, CQs
// and QPs, are safe for concurrent use (see the package documentation for
// how calls reach the engine).
type Device struct {
	l     link.Link
	e     *qp.Engine
	wake  func() // the link's Wake, if it has one
	rx    [64]*link.Packet
	dirty []*CQ // CQs with completions still in the engine's ring
	// deferSend leaves a PostSend's packets to the next turn (DeferSends).
	deferSend bool
	// clock is the device's time source; tests over a pipe with a fake
	// clock replace it.
	clock func() time.Time

	owner    atomic.Uint32 // 1 while a goroutine owns the engine and link
	sub      *ring[uint32] // requests handed to the owner
	free     *slotStack    // request slots not in use
	reqs     []request
	waiters  atomic.Int32  // inline Waits blocked until the engine is free
	sleeping atomic.Bool   // the owner is (about to be) asleep in the link
	released chan struct{} // capacity 1: the engine came free
	closed   atomic.Bool
	done     chan struct{} // closed by Close
	nextPD   atomic.Uint32

	startMu sync.Mutex // Start and Close, never the data path
	bg      atomic.Bool
	// starting keeps inline callers off the engine from Start on, so
	// Start is not starved by goroutines that keep taking it.
	starting atomic.Bool
	bgDone   chan struct{}
	// mapped is AllocMR's memory, unmapped at Close (startMu).
	mapped [][]byte

	// events queues the asynchronous events for GetAsyncEvent; srqs
	// maps the engine's SRQs to ours (owner only).
	events     chan AsyncEvent
	eventsLost atomic.Uint64
	srqs       map[*qp.SRQ]*SRQ

	// port follows the link's interface (port.go); nil when it has none.
	port       *netinfo.LinkWatch
	linkDowned atomic.Uint64
}

// Open makes a device over a link, which it owns from now on, and starts
// the goroutine that drives its engine (Start): the device answers its
// peers on its own, and CQ.Wait blocks until completions come. With the
// Inline option the application drives it instead.
func Open(l link.Link, opts ...Option) *Device {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d := open(l)
	d.deferSend = o.deferSend
	if !o.inline {
		d.Start()
	}
	return d
}

// An Option changes how Open, OpenAddr and OpenInterface make a device.
type Option func(*options)

type options struct{ inline, deferSend bool }

// Inline opens the device in inline mode, for programs that poll in a loop
// of their own for the lowest latency (perftest's busy-polling, uroce-perf,
// the benchmarks): the engine runs only inside the application's calls
// (CQ.Poll, CQ.Wait, PostSend, ...), run to completion on the calling
// goroutine with no hand-off. A device that nobody polls then answers no
// one, not even with an ACK, so a program that waits on one device while
// its peer in the same process sits unpolled waits until its context ends.
// Start switches an inline device to background mode.
func Inline() Option { return func(o *options) { o.inline = true } }

// DeferSends makes PostSend on an engine it finds free only queue the WR:
// its packets leave in the engine's next turn (CQ.Poll, CQ.Wait, or any
// call that runs the engine), with those of every WR posted meanwhile, as
// an RNIC fetches the WQEs that a run of posts rang the doorbell for. A
// burst of posts then costs the link one send (one system call on afxdp)
// instead of one per WR. It suits a program that polls after posting, as
// perftest's bandwidth loops do; one that posts and then waits elsewhere,
// not polling, keeps the default, whose PostSend sends at once. It matters
// to an inline device (with Inline) only: a started device's goroutine
// owns the engine and takes every WR in its own turn.
func DeferSends() Option { return func(o *options) { o.deferSend = true } }

func open(l link.Link) *Device {
	d := &Device{l: l, e: qp.NewEngine(l), clock: monoNow}
	// A UD QP's datagrams are at most the port's MTU (rxe's active_mtu),
	// the largest path MTU the link carries.
	d.e.PortMTU = d.MaxPathMTU()
	d.e.Addr = l.Info().Addr
	d.events = make(chan AsyncEvent, asyncEvents)
	d.srqs = map[*qp.SRQ]*SRQ{}
	d.e.OnAsyncEvent = d.asyncEvent
	d.initOwner()
	d.watchPort()
	return d
}

// OpenAddr opens a device on a local IP address with the default link
// backend, link.Default: the kernel UDP socket, unprivileged, started as
// Open starts it unless opts say Inline. For another backend, open its
// link with link.Open and the device with Open.
func OpenAddr(addr netip.Addr, opts ...Option) (*Device, error) {
	l, err := link.Open(link.Default, link.Config{Addr: addr})
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", addr, err)
	}
	return Open(l, opts...), nil
}

// OpenInterface opens a device on the first IPv4 (else IPv6 global)
// address of a network interface, with the default backend. It returns
// ErrNoAddr when the interface has none. Opts are Open's.
func OpenInterface(name string, opts ...Option) (*Device, error) {
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
	return OpenAddr(pick, opts...)
}

// clockBase anchors monoNow.
var clockBase = time.Now()

// monoNow is the devices' default clock: the time from the monotonic
// clock alone, as clockBase plus the monotonic time since it. The engine
// only subtracts and compares its times, and time.Now would read the wall
// clock as well on every engine turn (about twice the cost on amd64).
func monoNow() time.Time { return clockBase.Add(time.Since(clockBase)) }

// SetClock replaces the device's time source (for simulations with a fake
// clock). Call it before any traffic. It is set by the engine's owner,
// the only reader, so it is safe on a started device too.
func (d *Device) SetClock(now func() time.Time) {
	d.withEngine(func() error { d.clock = now; return nil })
}

// Link returns the device's link. Its Info may be read at any time; the
// rest of it belongs to the device's engine loop (see package link): read
// its counters with LinkStats.
func (d *Device) Link() link.Link { return d.l }

// LinkStats returns the link's counters, read by the engine's owner.
func (d *Device) LinkStats() link.Stats {
	var s link.Stats
	d.withEngine(func() error { s = d.l.Stats(); return nil })
	return s
}

// GIDs lists the device's GIDs: for RoCEv2 the local address, IPv4 in its
// IPv4-mapped IPv6 form (rxe's GID table holds the same).
func (d *Device) GIDs() []netip.Addr {
	a := d.l.Info().Addr
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	return []netip.Addr{a}
}

// GID returns the GID at index i of the device's table (ibv_query_gid):
// GIDs()[i], or ErrNoAddr. The table has one entry, the link's address,
// where rxe's has the link-local GID at 0 and the IPv4-mapped one at 1.
func (d *Device) GID(i int) (netip.Addr, error) {
	g := d.GIDs()
	if i < 0 || i >= len(g) {
		return netip.Addr{}, fmt.Errorf("GID index %d of %d: %w", i, len(g), ErrNoAddr)
	}
	return g[i], nil
}

// Addr returns the address peers send to.
func (d *Device) Addr() netip.Addr { return d.l.Info().Addr.Unmap() }

// MaxPathMTU returns the largest path MTU the link carries.
func (d *Device) MaxPathMTU() int { return PathMTU(d.l.Info()) }

// PathMTU returns the largest IB path MTU whose requests (BTH, RETH and
// ImmDt, the payload and the ICRC) fit a link described by info (its MTU
// and address family), or 0 if not even 256 bytes do.
func PathMTU(info link.Info) int {
	room := info.MaxRoCE() - maxReqHeaders
	for _, m := range []int{4096, 2048, 1024, 512, 256} {
		if m <= room {
			return m
		}
	}
	return 0
}

// Counters returns the device's counters, summed over its QPs.
func (d *Device) Counters() Counters {
	var c Counters
	d.withEngine(func() error { c = d.e.Stats(); return nil })
	c.LinkDowned = d.linkDowned.Load()
	return c
}

// Start drives the engine from a background goroutine until Close, for
// applications that block in Wait rather than poll. From then on every
// call hands its work to that goroutine. Open starts it already; Start is
// for a device opened Inline, and does nothing on a started one.
func (d *Device) Start() {
	d.startMu.Lock()
	defer d.startMu.Unlock()
	if d.bgDone != nil || d.closed.Load() {
		return
	}
	// Take the engine from inline callers, who stop taking it now; one
	// asleep in the link is woken (or its bounded sleep ends).
	d.starting.Store(true)
	for !d.owner.CompareAndSwap(0, 1) {
		if d.wake != nil {
			d.wake()
		}
		runtime.Gosched()
	}
	d.bg.Store(true)
	d.bgDone = make(chan struct{})
	go d.loop(d.bgDone)
}

// Close stops the background goroutine and closes the link. Calls in
// flight return ErrClosed; blocked Waits return it.
func (d *Device) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.unwatchPort()
	close(d.done)
	err := d.l.Close() // ends the owner's Wait
	d.startMu.Lock()
	bg := d.bgDone
	d.startMu.Unlock()
	if bg != nil {
		<-bg
	}
	d.unmapAll()
	return err
}

// PD is a protection domain (ibv_pd): MRs and QPs of one PD work together.
type PD struct {
	d  *Device
	id uint32
}

// AllocPD makes a protection domain.
func (d *Device) AllocPD() *PD {
	return &PD{d: d, id: d.nextPD.Add(1)}
}

// AHAttr are an address handle's attributes (ibv_ah_attr with its
// ibv_global_route): the peer's GID (its IP address, IPv4 in either form),
// traffic class, hop limit and flow label. The source GID is the device's.
type AHAttr struct {
	DGID         netip.Addr
	TrafficClass uint8
	HopLimit     uint8
	FlowLabel    uint32
}

// CreateAH makes an address handle for UD sends (ibv_create_ah). It
// returns ErrBadAttr for a missing DGID, a flow label over 20 bits, or a
// DGID of the other IP family than the device's.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	dst := attr.DGID.Unmap()
	if !dst.IsValid() || attr.FlowLabel > 0xfffff {
		return nil, fmt.Errorf("create AH: %w: DGID %v, flow label %#x", ErrBadAttr, attr.DGID, attr.FlowLabel)
	}
	self := pd.d.Addr()
	if dst.Is4() != self.Is4() {
		return nil, fmt.Errorf("create AH: %w: DGID %v from %v", ErrBadAttr, attr.DGID, self)
	}
	return &AH{DGID: dst, SGID: self, TrafficClass: attr.TrafficClass, HopLimit: attr.HopLimit, FlowLabel: attr.FlowLabel}, nil
}

// MR is a registered memory region (ibv_mr).
type MR struct {
	pd *PD
	m  *qp.MR
}

// RegMR registers buf with the access flags: O(1), no page pinning; the MR
// keeps buf alive until Dereg. Its address is buf's own, so a peer can be
// given &buf[i] as a remote address. Its key (LKey and RKey are one) is
// a random-looking 32-bit value that tells nothing about any other
// region's (docs/security.md). It returns an error wrapping qp.ErrBadMR
// for remote write or atomic access without local write.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	var m *qp.MR
	err := pd.d.withEngine(func() (err error) {
		m, err = pd.d.e.MRs.Register(pd.id, buf, addrOf(buf), access)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reg MR: %w", err)
	}
	return &MR{pd: pd, m: m}, nil
}

// Dereg removes the region: its keys stop working at once.
func (m *MR) Dereg() error {
	d := m.pd.d
	return d.withEngine(func() error { return d.e.MRs.Deregister(m.m.LKey) })
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
