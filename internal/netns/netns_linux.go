package netns

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotRoot is returned (or the test skipped) when the process lacks the
// privileges to make namespaces.
var ErrNotRoot = errors.New("netns: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")

// IFNameMax is the longest interface name Linux accepts (IFNAMSIZ-1).
const IFNameMax = 15

// RequireRoot skips the test unless the process runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to create network namespaces and veth pairs")
	}
}

var counter atomic.Uint32

// UniqueName returns a name that starts with prefix (at most 4 bytes are
// kept) and is unique to this test, this process and this call, at most
// IFNameMax bytes long, usable for both interfaces and namespaces.
func UniqueName(t testing.TB, prefix string) string {
	if len(prefix) > 4 {
		prefix = prefix[:4]
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	var b [12]byte
	n := counter.Add(1)
	pid := os.Getpid()
	for i := range 4 {
		b[i] = byte(pid >> (8 * i))
		b[4+i] = byte(n >> (8 * i))
	}
	h.Write(b[:8])
	// The counter's low bits go in verbatim so that names made by one
	// test in one process can never collide with each other.
	s := strconv.FormatUint(h.Sum64()&(1<<36-1), 36) // at most 7 chars
	name := fmt.Sprintf("%s%s%s", prefix, s, strconv.FormatUint(uint64(n%1296), 36))
	if len(name) > IFNameMax {
		name = name[:IFNameMax]
	}
	return name
}

// NS is a named network namespace owned by one test.
type NS struct {
	// Name is the namespace's name, as `ip netns exec NAME` knows it.
	Name string
	h    netns.NsHandle
	nl   *netlink.Handle
}

// New creates a namespace with its loopback up and registers its removal
// with t.Cleanup. It fails the test on error.
func New(t testing.TB) *NS {
	t.Helper()
	RequireRoot(t)
	ns, err := create(UniqueName(t, "urn"))
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("netns: loopback up in %s: %v", ns.Name, err)
	}
	return ns
}

func create(name string) (*NS, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan result)
	// NewNamed moves the calling thread into the new namespace. The
	// goroutine keeps its thread locked and exits, so the runtime throws
	// that thread away instead of reusing it in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		if err == nil {
			// Interfaces made here later get these defaults: IPv6
			// addresses, link-local ones included, are usable at once,
			// so neighbour discovery works from the first packet.
			for _, f := range []string{"all", "default"} {
				os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/accept_dad", []byte("0"), 0)
			}
		}
		ch <- result{h, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("create %s: %w", name, r.err)
	}
	nl, err := netlink.NewHandleAt(r.h)
	if err != nil {
		r.h.Close()
		netns.DeleteNamed(name)
		return nil, fmt.Errorf("netlink in %s: %w", name, err)
	}
	return &NS{Name: name, h: r.h, nl: nl}, nil
}

// Close deletes the namespace. Interfaces in it go with it; sockets opened
// in it keep it alive, invisibly, until they are closed.
func (n *NS) Close() error {
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	if n.h.IsOpen() {
		n.h.Close()
	}
	return netns.DeleteNamed(n.Name)
}

// Handle returns the namespace's file descriptor handle (owned by NS).
func (n *NS) Handle() netns.NsHandle { return n.h }

// Netlink returns a netlink handle bound to the namespace (owned by NS).
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Do runs fn on an OS thread switched into the namespace and returns its
// error. Sockets fn opens belong to the namespace.
func (n *NS) Do(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- fmt.Errorf("netns get: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.h); err != nil {
			ch <- fmt.Errorf("netns enter %s: %w", n.Name, err)
			return
		}
		var ferr error
		func() {
			defer func() {
				if p := recover(); p != nil {
					ferr = fmt.Errorf("panic in %s: %v", n.Name, p)
				}
			}()
			ferr = fn()
		}()
		// Only a thread that made it back to its own namespace may be
		// reused; otherwise it stays locked and dies with the goroutine.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- ferr
	}()
	return <-ch
}

// Veth is one end of a veth pair.
type Veth struct {
	NS    *NS
	Name  string
	Index int
	MAC   net.HardwareAddr
}

// NewVeth creates a veth pair with one end in a and the other in b, both up,
// and registers its removal with t.Cleanup.
func NewVeth(t testing.TB, a, b *NS) (Veth, Veth) {
	t.Helper()
	na, nb := UniqueName(t, "urv"), UniqueName(t, "urv")
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: na},
		PeerName:      nb,
		PeerNamespace: netlink.NsFd(b.h),
	}
	if err := a.nl.LinkAdd(v); err != nil {
		t.Fatalf("netns: veth %s/%s: %v", na, nb, err)
	}
	t.Cleanup(func() {
		// Deleting one end removes both; the namespace may already be
		// gone, taking the pair with it.
		if l, err := a.nl.LinkByName(na); err == nil {
			a.nl.LinkDel(l)
		}
	})
	ea, eb := end(t, a, na), end(t, b, nb)
	return ea, eb
}

func end(t testing.TB, ns *NS, name string) Veth {
	t.Helper()
	l, err := ns.nl.LinkByName(name)
	if err != nil {
		t.Fatalf("netns: %s in %s: %v", name, ns.Name, err)
	}
	if err := ns.nl.LinkSetUp(l); err != nil {
		t.Fatalf("netns: %s up: %v", name, err)
	}
	return Veth{NS: ns, Name: name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
}

// AddAddr assigns p to the interface. IPv6 addresses skip duplicate address
// detection so they are usable at once.
func (v Veth) AddAddr(t testing.TB, p netip.Prefix) {
	t.Helper()
	if err := v.addAddr(p); err != nil {
		t.Fatalf("netns: %v", err)
	}
}

func (v Veth) addAddr(p netip.Prefix) error {
	l, err := v.NS.nl.LinkByIndex(v.Index)
	if err != nil {
		return fmt.Errorf("link %s: %w", v.Name, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{
		IP:   p.Addr().AsSlice(),
		Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
	}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := v.NS.nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("addr %s on %s: %w", p, v.Name, err)
	}
	return nil
}

// addNeighbors adds permanent neighbour entries on v for addrs at mac.
func (v Veth) addNeighbors(t testing.TB, addrs []netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	for _, a := range addrs {
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: v.Index, Family: fam, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: mac}
		if err := v.NS.nl.NeighSet(n); err != nil {
			t.Fatalf("netns: neighbour %v on %s: %v", a, v.Name, err)
		}
	}
}

// SetMTU sets the interface MTU.
func (v Veth) SetMTU(t testing.TB, mtu int) {
	t.Helper()
	l, err := v.NS.nl.LinkByIndex(v.Index)
	if err == nil {
		err = v.NS.nl.LinkSetMTU(l, mtu)
	}
	if err != nil {
		t.Fatalf("netns: mtu %d on %s: %v", mtu, v.Name, err)
	}
}

// Pair is two namespaces joined by a veth pair, each end addressed.
type Pair struct {
	A, B   Veth
	AddrA  netip.Addr
	AddrB  netip.Addr
	AddrsA []netip.Addr // every address on A (one per family asked for)
	AddrsB []netip.Addr
	MTU    int
}

// PairConfig says how to build a Pair.
type PairConfig struct {
	// MTU of both ends; 0 keeps the default (1500).
	MTU int
	// Prefixes for the two ends, e.g. 10.0.0.1/24 and 10.0.0.2/24, and
	// optionally an IPv6 pair. Empty means 10.99.0.1/24, 10.99.0.2/24,
	// fd00:99::1/64 and fd00:99::2/64.
	A, B []netip.Prefix
	// StaticNeighbors gives each end a permanent neighbour entry for
	// every address of the other, so nothing waits on ARP or neighbour
	// discovery. A fresh veth end can drop IPv6's first neighbour
	// solicitation (its IPv6 stack is not ready yet: the packets arrive
	// and no ICMPv6 counter moves), and the kernel asks again only after
	// a second, longer than an RC QP's default retries last (8 × 67 ms).
	// Tests of next-hop resolution leave it off.
	StaticNeighbors bool
}

// NewPair builds two namespaces joined by an addressed veth pair. Everything
// is removed by t.Cleanup.
func NewPair(t testing.TB, cfg PairConfig) *Pair {
	t.Helper()
	RequireRoot(t)
	if len(cfg.A) == 0 {
		cfg.A = []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd00:99::1/64")}
		cfg.B = []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24"), netip.MustParsePrefix("fd00:99::2/64")}
	}
	na, nb := New(t), New(t)
	a, b := NewVeth(t, na, nb)
	p := &Pair{A: a, B: b, MTU: 1500}
	if cfg.MTU != 0 {
		a.SetMTU(t, cfg.MTU)
		b.SetMTU(t, cfg.MTU)
		p.MTU = cfg.MTU
	}
	for _, x := range cfg.A {
		a.AddAddr(t, x)
		p.AddrsA = append(p.AddrsA, x.Addr())
	}
	for _, x := range cfg.B {
		b.AddAddr(t, x)
		p.AddrsB = append(p.AddrsB, x.Addr())
	}
	p.AddrA, p.AddrB = p.AddrsA[0], p.AddrsB[0]
	if cfg.StaticNeighbors {
		a.addNeighbors(t, p.AddrsB, b.MAC)
		b.addNeighbors(t, p.AddrsA, a.MAC)
	}
	return p
}

// Addr returns the first address of the given family (4 or 6) on the A and
// B ends.
func (p *Pair) Addr(family int) (a, b netip.Addr) {
	pick := func(as []netip.Addr) netip.Addr {
		for _, x := range as {
			if (family == 4) == x.Is4() {
				return x
			}
		}
		return netip.Addr{}
	}
	return pick(p.AddrsA), pick(p.AddrsB)
}

// Create makes a named namespace with its loopback up, for programs that
// are not tests (the caller must Close it).
func Create(name string) (*NS, error) {
	ns, err := create(name)
	if err != nil {
		return nil, err
	}
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("loopback up in %s: %w", name, err)
	}
	return ns, nil
}

// AddVeth joins a and b with a veth pair named na (in a) and nb (in b),
// both up, with the given MTU (0 keeps the default), for programs that are
// not tests. Closing either namespace removes the pair.
func AddVeth(a, b *NS, na, nb string, mtu int) (Veth, Veth, error) {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: na, MTU: mtu}, PeerName: nb, PeerNamespace: netlink.NsFd(b.h)}
	if err := a.nl.LinkAdd(v); err != nil {
		return Veth{}, Veth{}, fmt.Errorf("veth %s/%s: %w", na, nb, err)
	}
	var out [2]Veth
	for i, e := range []struct {
		ns   *NS
		name string
	}{{a, na}, {b, nb}} {
		l, err := e.ns.nl.LinkByName(e.name)
		if err == nil && mtu != 0 {
			err = e.ns.nl.LinkSetMTU(l, mtu)
		}
		if err == nil {
			err = e.ns.nl.LinkSetUp(l)
		}
		if err != nil {
			return Veth{}, Veth{}, fmt.Errorf("veth %s: %w", e.name, err)
		}
		out[i] = Veth{NS: e.ns, Name: e.name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
	}
	return out[0], out[1], nil
}

// Assign adds an address to the interface (AddAddr without a test).
func (v Veth) Assign(p netip.Prefix) error { return v.addAddr(p) }

// UDPStats returns the namespace's UDP counters by name, the "Udp:" rows
// of its /proc/net/snmp (InDatagrams, RcvbufErrors, SndbufErrors, ...):
// where the kernel dropped what a test sent.
func (n *NS) UDPStats() (map[string]uint64, error) {
	var st map[string]uint64
	err := n.Do(func() error {
		// thread-self: the namespace of this (locked) thread, not of
		// the process's main thread.
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		st = ParseSNMP(b, "Udp:")
		return nil
	})
	return st, err
}

// ParseSNMP returns the counters of one protocol's rows ("Udp:", "Ip:")
// of a /proc/net/snmp: a row of names, then a row of values.
func ParseSNMP(b []byte, proto string) map[string]uint64 {
	st := map[string]uint64{}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names[1:] {
			if i+1 < len(f) {
				st[name], _ = strconv.ParseUint(f[i+1], 10, 64)
			}
		}
		break
	}
	return st
}
