package netinfo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Errors returned by the resolver. Lookup errors also match link.ErrNoRoute.
var (
	// ErrNoRoute is returned when the kernel has no route to the destination.
	ErrNoRoute = fmt.Errorf("netinfo: %w", link.ErrNoRoute)
	// ErrUnresolved is returned when the next hop's MAC address could not be
	// learned within the timeout.
	ErrUnresolved = fmt.Errorf("netinfo: neighbour unresolved: %w", link.ErrNoRoute)
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("netinfo: resolver closed")
	// ErrPending is returned by Resolve while the answer is being looked
	// up in the background; it matches link.ErrResolving.
	ErrPending = fmt.Errorf("netinfo: %w", link.ErrResolving)
)

// Route is how a destination is reached.
type Route struct {
	Dst     netip.Addr
	Ifindex int
	Ifname  string
	// Src is the source address the kernel would pick.
	Src netip.Addr
	// Gateway is the router, or the zero Addr when Dst is on-link.
	Gateway netip.Addr
	// NextHop is Gateway, or Dst when on-link: whose MAC DstMAC is.
	NextHop netip.Addr
	// MTU is the route's MTU if it has one, else the interface's.
	MTU    int
	SrcMAC [6]byte
	DstMAC [6]byte
}

// Options configure a Resolver. The zero value is usable.
type Options struct {
	// NetNS is the namespace to work in; nil means the caller's current
	// one. The resolver keeps its own copy of the handle.
	NetNS *netns.NsHandle
	// TTL bounds how long an answer is cached; 0 means 10 s.
	TTL time.Duration
	// Timeout bounds neighbour resolution; 0 means 3 s.
	Timeout time.Duration
	// NoSubscribe turns off netlink change notifications (TTL only).
	NoSubscribe bool
	// FailTTL is how long Resolve answers a failed background lookup's
	// error before it tries again; 0 means 1 s.
	FailTTL time.Duration
}

type failure struct {
	err   error
	until time.Time
}

type entry struct {
	r   Route
	exp time.Time
}

// Resolver looks up routes and neighbours in one namespace. It is safe for
// concurrent use.
type Resolver struct {
	nl   *netlink.Handle
	ns   netns.NsHandle
	opt  Options
	done chan struct{}

	mu      sync.RWMutex
	cache   map[netip.Addr]entry
	pending map[netip.Addr]struct{} // background lookups running
	failed  map[netip.Addr]failure  // recent background failures
	closed  bool
	bg      sync.WaitGroup

	// gen changes whenever an answer Resolve would give may have: a
	// lookup stored or failed, a flush, and every TTL (the clock's part,
	// so that Next needs no clock). Hop entries are valid while it stands.
	gen atomic.Uint64
}

// New opens a resolver.
func New(opt Options) (*Resolver, error) {
	if opt.TTL == 0 {
		opt.TTL = 10 * time.Second
	}
	if opt.Timeout == 0 {
		opt.Timeout = 3 * time.Second
	}
	if opt.FailTTL == 0 {
		opt.FailTTL = time.Second
	}
	var (
		nl  *netlink.Handle
		err error
	)
	ns := netns.None()
	// rtnetlink only, as handle explains.
	if opt.NetNS != nil {
		// Keep our own copy so the caller may close theirs.
		var dup int
		dup, err = unix.Dup(int(*opt.NetNS))
		if err != nil {
			return nil, fmt.Errorf("netinfo: dup netns: %w", err)
		}
		ns = netns.NsHandle(dup)
		nl, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	} else {
		nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		if ns.IsOpen() {
			ns.Close()
		}
		return nil, fmt.Errorf("netinfo: netlink: %w", err)
	}
	r := &Resolver{nl: nl, ns: ns, opt: opt, done: make(chan struct{}), cache: make(map[netip.Addr]entry),
		pending: make(map[netip.Addr]struct{}), failed: make(map[netip.Addr]failure)}
	if !opt.NoSubscribe {
		r.subscribe()
	}
	go r.tick()
	return r, nil
}

// tick moves gen every TTL (every millisecond at most), so a Hop entry is
// checked against the cache's clock at least that often.
func (r *Resolver) tick() {
	t := time.NewTicker(max(r.opt.TTL, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			r.gen.Add(1)
		}
	}
}

// subscribe empties the cache on every route, neighbour or address change.
// A failed subscription leaves the TTL to do the job.
func (r *Resolver) subscribe() {
	var nsp *netns.NsHandle
	if r.ns.IsOpen() {
		nsp = &r.ns
	}
	neigh := make(chan netlink.NeighUpdate, 64)
	route := make(chan netlink.RouteUpdate, 64)
	addr := make(chan netlink.AddrUpdate, 64)
	okN := netlink.NeighSubscribeWithOptions(neigh, r.done, netlink.NeighSubscribeOptions{Namespace: nsp}) == nil
	okR := netlink.RouteSubscribeWithOptions(route, r.done, netlink.RouteSubscribeOptions{Namespace: nsp}) == nil
	okA := netlink.AddrSubscribeWithOptions(addr, r.done, netlink.AddrSubscribeOptions{Namespace: nsp}) == nil
	if !okN && !okR && !okA {
		return
	}
	go func() {
		for {
			select {
			case <-r.done:
				return
			case u, ok := <-neigh:
				if !ok {
					neigh = nil
					continue
				}
				// A neighbour becoming reachable changes no cached
				// answer (only reachable ones are cached); anything
				// else may invalidate one.
				if u.Type == unix.RTM_NEWNEIGH && u.State&(netlink.NUD_REACHABLE|netlink.NUD_PERMANENT|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0 && !r.macChanged(u.Neigh) {
					continue
				}
				r.Flush()
			case _, ok := <-route:
				if !ok {
					route = nil
					continue
				}
				r.Flush()
			case _, ok := <-addr:
				if !ok {
					addr = nil
					continue
				}
				r.Flush()
			}
		}
	}()
}

func (r *Resolver) macChanged(n netlink.Neigh) bool {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok || len(n.HardwareAddr) != 6 {
		return false
	}
	ip = ip.Unmap()
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, e := range r.cache {
		if e.r.NextHop == ip && e.r.Ifindex == n.LinkIndex && [6]byte(n.HardwareAddr) != e.r.DstMAC {
			return true
		}
	}
	return false
}

// Flush makes every cached answer stale and forgets failures: Lookup asks
// the kernel again, and Resolve serves the old answer only while it asks
// in the background. (Emptying the cache instead would make a link drop
// packets on every neighbour event the kernel sends about an entry being
// resolved, though its answer stands.)
func (r *Resolver) Flush() {
	r.mu.Lock()
	for k, e := range r.cache {
		e.exp = time.Time{}
		r.cache[k] = e
	}
	clear(r.failed)
	r.gen.Add(1)
	r.mu.Unlock()
}

// Close stops the resolver.
func (r *Resolver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.done)
	// Background lookups use the netlink handle; they see done and stop.
	r.bg.Wait()
	r.nl.Close()
	if r.ns.IsOpen() {
		r.ns.Close()
	}
	return nil
}

// Cached returns the cached answer for dst, if a fresh one exists. It does
// not allocate: links call it per packet.
func (r *Resolver) Cached(dst netip.Addr, now time.Time) (Route, bool) {
	r.mu.RLock()
	e, ok := r.cache[dst]
	r.mu.RUnlock()
	if !ok || now.After(e.exp) {
		return Route{}, false
	}
	return e.r, true
}

// Lookup returns how dst is reached, from the cache when fresh, otherwise
// from the kernel, resolving the next hop's MAC address if needed (which
// may take up to the timeout). Errors match ErrNoRoute or ErrUnresolved
// (and link.ErrNoRoute).
func (r *Resolver) Lookup(dst netip.Addr) (Route, error) {
	dst = dst.Unmap()
	now := time.Now()
	if rt, ok := r.Cached(dst, now); ok {
		return rt, nil
	}
	rt, err := r.lookup(dst)
	if err != nil {
		return Route{}, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return Route{}, ErrClosed
	}
	r.cache[dst] = entry{rt, time.Now().Add(r.opt.TTL)}
	r.gen.Add(1)
	r.mu.Unlock()
	return rt, nil
}

// Resolve is Lookup for a packet path that must not wait: it returns the
// cached answer for dst when there is a fresh one; otherwise it starts a
// lookup in the background (one per destination at a time) and returns
// ErrPending, and the answer is cached for a later call. An answer past
// its TTL is still returned while the background lookup refreshes it, so
// a busy destination never sees ErrPending again unless a change the
// kernel announced emptied the cache. A background lookup's failure is
// returned for FailTTL, then tried again. It does not allocate on a cache
// hit.
func (r *Resolver) Resolve(dst netip.Addr, now time.Time) (Route, error) {
	dst = dst.Unmap()
	r.mu.RLock()
	e, ok := r.cache[dst]
	r.mu.RUnlock()
	if ok && !now.After(e.exp) {
		return e.r, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Route{}, ErrClosed
	}
	if _, running := r.pending[dst]; !running {
		if f, failed := r.failed[dst]; failed && now.Before(f.until) {
			return Route{}, f.err
		}
		r.pending[dst] = struct{}{}
		r.bg.Add(1)
		go r.background(dst)
	}
	if e, ok := r.cache[dst]; ok {
		return e.r, nil // stale, being refreshed
	}
	return Route{}, ErrPending
}

func (r *Resolver) background(dst netip.Addr) {
	defer r.bg.Done()
	rt, err := r.lookup(dst)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, dst)
	if r.closed {
		return
	}
	r.gen.Add(1)
	if err != nil {
		delete(r.cache, dst)
		r.failed[dst] = failure{err, now.Add(r.opt.FailTTL)}
		return
	}
	delete(r.failed, dst)
	r.cache[dst] = entry{rt, now.Add(r.opt.TTL)}
}

// Hop remembers the last answer Next gave, for a caller that sends from
// one goroutine (a link's data path). The zero value is empty.
type Hop struct {
	dst netip.Addr
	gen uint64
	rt  Route
}

// Next is Resolve for a packet path: while the destination is the one
// asked last and nothing the resolver knows has changed since (no lookup
// stored, no flush, no TTL gone by), it answers from h with one atomic
// load, and reads no clock. Otherwise it asks Resolve and keeps the
// answer. The Route returned is h's and is valid until h's next use.
func (r *Resolver) Next(h *Hop, dst netip.Addr) (*Route, error) {
	dst = dst.Unmap()
	g := r.gen.Load()
	if h.dst == dst && h.gen == g && dst.IsValid() {
		return &h.rt, nil
	}
	rt, err := r.Resolve(dst, time.Now())
	if err != nil {
		h.dst = netip.Addr{}
		return nil, err
	}
	// g was read before Resolve: a change racing with this call leaves
	// h already stale, never fresh with an old answer.
	h.dst, h.gen, h.rt = dst, g, rt
	return &h.rt, nil
}

func (r *Resolver) lookup(dst netip.Addr) (Route, error) {
	rt, err := r.Route(dst)
	if err != nil {
		return rt, err
	}
	mac, err := r.Neighbour(rt.Ifindex, rt.NextHop)
	if err != nil {
		return rt, err
	}
	rt.DstMAC = mac
	return rt, nil
}

// Route asks the kernel for the route to dst, without the neighbour.
func (r *Resolver) Route(dst netip.Addr) (Route, error) {
	dst = dst.Unmap()
	rs, err := r.nl.RouteGet(dst.AsSlice())
	if err != nil || len(rs) == 0 {
		return Route{}, fmt.Errorf("route to %s: %w", dst, ErrNoRoute)
	}
	kr := rs[0]
	l, err := r.nl.LinkByIndex(kr.LinkIndex)
	if err != nil {
		return Route{}, fmt.Errorf("route to %s: link %d: %v: %w", dst, kr.LinkIndex, err, ErrNoRoute)
	}
	rt := Route{Dst: dst, Ifindex: kr.LinkIndex, Ifname: l.Attrs().Name, MTU: l.Attrs().MTU, NextHop: dst}
	if kr.MTU > 0 && kr.MTU < rt.MTU {
		rt.MTU = kr.MTU
	}
	if a, ok := netip.AddrFromSlice(kr.Src); ok {
		rt.Src = a.Unmap()
	}
	if a, ok := netip.AddrFromSlice(kr.Gw); ok && !a.IsUnspecified() {
		rt.Gateway = a.Unmap()
		rt.NextHop = rt.Gateway
	}
	if len(l.Attrs().HardwareAddr) == 6 {
		rt.SrcMAC = [6]byte(l.Attrs().HardwareAddr)
	}
	return rt, nil
}

// usable neighbour states: the kernel itself would transmit to these.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP

// Neighbour returns the MAC address of ip on interface ifindex, asking the
// kernel to resolve it when it is not known.
func (r *Resolver) Neighbour(ifindex int, ip netip.Addr) ([6]byte, error) {
	ip = ip.Unmap()
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	deadline := time.Now().Add(r.opt.Timeout)
	delay := 200 * time.Microsecond
	triggered := time.Time{}
	for {
		ns, err := r.nl.NeighList(ifindex, fam)
		if err != nil {
			return [6]byte{}, fmt.Errorf("neighbours of %d: %v: %w", ifindex, err, ErrUnresolved)
		}
		state := -1
		for _, n := range ns {
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok || a.Unmap() != ip {
				continue
			}
			state = n.State
			if n.State&usable != 0 && len(n.HardwareAddr) == 6 {
				return [6]byte(n.HardwareAddr), nil
			}
			if n.State&usable != 0 && n.State&netlink.NUD_NOARP != 0 {
				// Loopback-like device: no link-layer address.
				return [6]byte{}, nil
			}
		}
		now := time.Now()
		if now.After(deadline) {
			return [6]byte{}, fmt.Errorf("%s on %d (state %#x): %w", ip, ifindex, state, ErrUnresolved)
		}
		// Ask for resolution when there is no entry, or it failed, and
		// again every second while waiting.
		if state == -1 || state&netlink.NUD_FAILED != 0 || now.Sub(triggered) > time.Second {
			if err := r.trigger(ifindex, ip, fam); err != nil {
				return [6]byte{}, fmt.Errorf("resolve %s on %d: %v: %w", ip, ifindex, err, ErrUnresolved)
			}
			triggered = now
		}
		select {
		case <-r.done:
			return [6]byte{}, ErrClosed
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// trigger starts ARP / neighbour discovery as an outgoing packet would:
// RTM_NEWNEIGH with NTF_USE makes the kernel call neigh_event_send.
func (r *Resolver) trigger(ifindex int, ip netip.Addr, fam int) error {
	return r.nl.NeighSet(&netlink.Neigh{
		LinkIndex: ifindex,
		Family:    fam,
		State:     netlink.NUD_NONE,
		Flags:     netlink.NTF_USE,
		IP:        net.IP(ip.AsSlice()),
	})
}

// GID is one entry of a port's GID table.
type GID struct {
	// Index is the entry's index in its interface's table.
	Index int
	// GID is the 16-byte GID; IPv4 addresses appear IPv4-mapped.
	GID netip.Addr
	// Type is always "RoCE v2".
	Type    string
	Netdev  string
	Ifindex int
}

// GIDType is the only GID type uroce uses.
const GIDType = "RoCE v2"

// GIDs returns the GID table of every interface that has a MAC address or
// an IP address, ordered by interface index, then GID index.
func (r *Resolver) GIDs() ([]GID, error) {
	ls, err := r.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netinfo: links: %w", err)
	}
	var out []GID
	for _, l := range ls {
		g, err := r.GIDTable(l.Attrs().Index)
		if err != nil {
			return nil, err
		}
		out = append(out, g...)
	}
	return out, nil
}

// GIDTable returns the GID table of one interface: the default link-local
// GID from the MAC address first (when the interface has a nonzero MAC),
// then one per address, IPv4 before IPv6 as the kernel lists them.
func (r *Resolver) GIDTable(ifindex int) ([]GID, error) {
	l, err := r.nl.LinkByIndex(ifindex)
	if err != nil {
		return nil, fmt.Errorf("netinfo: link %d: %w", ifindex, err)
	}
	name := l.Attrs().Name
	var out []GID
	add := func(a netip.Addr) {
		for _, g := range out {
			if g.GID == a {
				return
			}
		}
		out = append(out, GID{Index: len(out), GID: a, Type: GIDType, Netdev: name, Ifindex: ifindex})
	}
	if mac := l.Attrs().HardwareAddr; len(mac) == 6 && [6]byte(mac) != ([6]byte{}) {
		add(LinkLocal([6]byte(mac)))
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		as, err := r.nl.AddrList(l, fam)
		if err != nil {
			return nil, fmt.Errorf("netinfo: addresses of %s: %w", name, err)
		}
		for _, a := range as {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			add(GIDOf(ip))
		}
	}
	return out, nil
}

// GIDOf returns the RoCEv2 GID of an IP address: IPv4 mapped into IPv6.
func GIDOf(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

// LinkLocal returns the EUI-64 link-local address made from a MAC address
// (RFC 4291 appendix A), rxe's default GID.
func LinkLocal(mac [6]byte) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8] = mac[0] ^ 0x02
	b[9], b[10] = mac[1], mac[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(b)
}
