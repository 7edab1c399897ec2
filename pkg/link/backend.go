package link

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Default is the backend used when none is named: a kernel UDP socket,
// which needs no privileges.
//
// It needs no import of its own: package verbs imports pkg/link/udp,
// since its OpenAddr and OpenInterface open the default, so every program
// that uses verbs has it. A program that opens links without verbs
// imports pkg/link/udp itself.
const Default = "udp"

// Config says where a link opened by name sits. Each backend's package
// has a fuller Config for its other settings; through Open they take
// their defaults.
type Config struct {
	// Interface is the network interface. afpacket and afxdp need one
	// (Open fails with ErrNoInterface); udp ignores it: the kernel routes.
	Interface string
	// Addr is the local IP address. udp and afpacket need one; afxdp
	// takes the interface's first when it is zero.
	Addr netip.Addr
	// Wait is how the link's Wait waits, for a backend that has a choice
	// (afxdp); the others sleep in the kernel whatever it says.
	Wait WaitMode
	// Bind is how a backend that hands frames to a driver binds (afxdp);
	// the others copy through the kernel whatever it says.
	Bind BindMode
}

// BindMode says whether an AF_XDP link asks the driver for zero-copy.
type BindMode uint8

const (
	// BindAuto binds zero-copy where the driver offers it, else copy:
	// the default. The link reports which it got.
	BindAuto BindMode = iota
	// BindCopy has the kernel copy frames, whatever the driver offers.
	BindCopy
	// BindZeroCopy binds zero-copy or fails to open.
	BindZeroCopy
)

// bindNames are the names ParseBindMode reads and String prints.
var bindNames = [...]string{BindAuto: "auto", BindCopy: "copy", BindZeroCopy: "zero-copy"}

func (m BindMode) String() string {
	if int(m) < len(bindNames) {
		return bindNames[m]
	}
	return fmt.Sprintf("BindMode(%d)", m)
}

// ParseBindMode reads "auto", "copy" or "zero-copy" ("zc" too).
func ParseBindMode(s string) (BindMode, error) {
	if s == "zc" {
		return BindZeroCopy, nil
	}
	for m, n := range bindNames {
		if s == n {
			return BindMode(m), nil
		}
	}
	return 0, fmt.Errorf("link: bind mode %q: want auto, copy or zero-copy", s)
}

// WaitMode says how a link waits for packets: the trade between latency
// and the CPU a waiting engine loop burns.
type WaitMode uint8

const (
	// WaitSleep sleeps until a packet arrives (poll(2)): the default.
	WaitSleep WaitMode = iota
	// WaitSpin spins until a packet arrives: the lowest latency, for one
	// core kept busy (perftest's latency tests busy-poll their CQ too).
	WaitSpin
	// WaitSpinThenSleep spins a moment before it sleeps.
	WaitSpinThenSleep
)

// Opener opens a link of one backend.
type Opener func(Config) (Link, error)

var (
	backendsMu sync.RWMutex
	backends   = map[string]Opener{}
)

// Register makes a backend available to Open under name: the one place
// that maps a backend's name to the code that opens it, so a program
// picks a backend with a string (a --link flag) and the API package names
// none. Each backend calls it from its package's init, as database/sql
// drivers do, so a backend is there when its package is imported, for
// the side effect if nothing else:
//
//	import _ "github.com/uroce/uroce/pkg/link/afxdp"
//
// and a program that never uses one does not carry it (afxdp brings
// cilium/ebpf and an XDP program). The default, udp, comes with package
// verbs (see Default). pipe does not register: it makes a connected
// pair, not a link on an address.
//
// Register panics if name is taken or open is nil: either is a mistake in
// the program, not in its input.
func Register(name string, open Opener) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if open == nil {
		panic("link: Register " + name + " with a nil Opener")
	}
	if _, dup := backends[name]; dup {
		panic("link: Register called twice for " + name)
	}
	backends[name] = open
}

// Open opens a link of the named backend. An unknown name fails with
// ErrUnknownBackend, whose message lists the backends registered.
func Open(name string, cfg Config) (Link, error) {
	backendsMu.RLock()
	open := backends[name]
	backendsMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("link %q: %w (have %s)", name, ErrUnknownBackend, strings.Join(Backends(), ", "))
	}
	return open(cfg)
}

// Backends returns the names of the registered backends, sorted.
func Backends() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
