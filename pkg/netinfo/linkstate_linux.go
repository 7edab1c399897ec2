package netinfo

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNoInterface is returned when no interface matches: none holds the
// address InterfaceByAddr is given, or WatchLink's interface does not
// exist.
var ErrNoInterface = errors.New("netinfo: no such interface")

// Interface names one network interface.
type Interface struct {
	Index int
	Name  string
	// Loopback is set for the loopback device (IFF_LOOPBACK).
	Loopback bool
}

// InterfaceByAddr returns the interface that holds addr in the namespace
// ns (nil: the calling thread's). It returns ErrNoInterface when none does.
func InterfaceByAddr(ns *netns.NsHandle, addr netip.Addr) (Interface, error) {
	nl, err := handle(ns)
	if err != nil {
		return Interface{}, err
	}
	defer nl.Close()
	addr = addr.Unmap()
	fam := netlink.FAMILY_V4
	if addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	as, err := nl.AddrList(nil, fam)
	if err != nil {
		return Interface{}, fmt.Errorf("netinfo: addresses: %w", err)
	}
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap() != addr {
			continue
		}
		l, err := nl.LinkByIndex(a.LinkIndex)
		if err != nil {
			return Interface{}, fmt.Errorf("netinfo: interface %d of %v: %w", a.LinkIndex, addr, err)
		}
		at := l.Attrs()
		return Interface{Index: at.Index, Name: at.Name, Loopback: at.RawFlags&unix.IFF_LOOPBACK != 0}, nil
	}
	return Interface{}, fmt.Errorf("%w holds %v", ErrNoInterface, addr)
}

// handle opens a netlink handle in ns, or in the calling thread's
// namespace, for rtnetlink only: with no family named, the netlink
// package also opens XFRM and netfilter sockets, which fail with
// "protocol not supported" on a kernel built without them (Debian 13's
// guest kernel in the lab).
func handle(ns *netns.NsHandle) (*netlink.Handle, error) {
	var (
		nl  *netlink.Handle
		err error
	)
	if ns != nil {
		nl, err = netlink.NewHandleAt(*ns, unix.NETLINK_ROUTE)
	} else {
		nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("netinfo: netlink: %w", err)
	}
	return nl, nil
}

// LinkUp reports whether an interface carries traffic: administratively
// up and with carrier (IFF_UP and IFF_LOWER_UP), what rxe asks of its
// netdev (netif_running && netif_carrier_ok) for an active port.
func LinkUp(a *netlink.LinkAttrs) bool {
	const want = unix.IFF_UP | unix.IFF_LOWER_UP
	return a.RawFlags&want == want
}

// WatchOptions say which interface WatchLink follows and whom it tells.
type WatchOptions struct {
	// NetNS is the namespace the interface is in; nil means the calling
	// thread's. The watch keeps its own copy of the handle.
	NetNS *netns.NsHandle
	// Index, or else Name, names the interface.
	Index int
	Name  string
	// OnChange is called with the new state each time it changes, in
	// order, from the watch's goroutine, once Up reports it; it must not
	// block for long and must not call Close.
	OnChange func(up bool)
}

// LinkWatch follows one interface's state (LinkUp) through rtnetlink's
// link notifications (RTNLGRP_LINK). It is safe for concurrent use.
type LinkWatch struct {
	iface    Interface
	ns       netns.NsHandle
	nl       *netlink.Handle
	onChange func(bool)
	up       atomic.Bool

	done      chan struct{} // closed by Close: ends the subscriptions
	exited    chan struct{} // closed as run returns
	closeOnce sync.Once
}

// WatchLink starts following an interface: it subscribes to link
// notifications, then reads the interface's state, so no change between
// the two is missed. From then on a goroutine takes the notifications
// until Close. Errors wrap ErrNoInterface when the interface does not
// exist.
//
// Only changes of state reach OnChange: the kernel announces an interface
// for many reasons (statistics, addresses, MTU), and says it is down more
// than once as it goes down (IFF_UP cleared, then the carrier lost). An
// interface deleted counts as down for good; one made again under the
// same name is another interface and is not followed.
func WatchLink(opt WatchOptions) (*LinkWatch, error) {
	w := &LinkWatch{onChange: opt.OnChange, done: make(chan struct{}), exited: make(chan struct{})}
	var err error
	if opt.NetNS != nil {
		// Keep our own copy so the caller may close theirs.
		var fd int
		fd, err = unix.Dup(int(*opt.NetNS))
		if err != nil {
			return nil, fmt.Errorf("netinfo: dup netns: %w", err)
		}
		w.ns = netns.NsHandle(fd)
	} else {
		// The namespace the caller's thread is in now, so that the watch
		// goroutine's later subscriptions are made there too.
		w.ns, err = netns.Get()
		if err != nil {
			return nil, fmt.Errorf("netinfo: netns: %w", err)
		}
	}
	if w.nl, err = handle(&w.ns); err != nil {
		w.ns.Close()
		return nil, err
	}
	ch, err := w.subscribe()
	if err == nil {
		err = w.read(opt.Index, opt.Name)
	}
	if err != nil {
		close(w.done) // ends the subscription, if made
		if ch != nil {
			for range ch {
			}
		}
		w.nl.Close()
		w.ns.Close()
		return nil, err
	}
	go w.run(ch)
	return w, nil
}

func (w *LinkWatch) subscribe() (chan netlink.LinkUpdate, error) {
	ch := make(chan netlink.LinkUpdate, 16)
	if err := netlink.LinkSubscribeWithOptions(ch, w.done, netlink.LinkSubscribeOptions{Namespace: &w.ns}); err != nil {
		return nil, fmt.Errorf("netinfo: subscribe to links: %w", err)
	}
	return ch, nil
}

// read looks the interface up and takes its state, without telling
// OnChange.
func (w *LinkWatch) read(index int, name string) error {
	var (
		l   netlink.Link
		err error
	)
	if index != 0 {
		l, err = w.nl.LinkByIndex(index)
	} else {
		l, err = w.nl.LinkByName(name)
	}
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return fmt.Errorf("%w: %q (index %d): %v", ErrNoInterface, name, index, err)
		}
		return fmt.Errorf("netinfo: interface %q (index %d): %w", name, index, err)
	}
	a := l.Attrs()
	w.iface = Interface{Index: a.Index, Name: a.Name, Loopback: a.RawFlags&unix.IFF_LOOPBACK != 0}
	w.up.Store(LinkUp(a))
	return nil
}

// run takes notifications until Close. It reads the channel until the
// subscription closes it, since the subscription's goroutine blocks on a
// full channel and would otherwise never see the socket closed.
func (w *LinkWatch) run(ch chan netlink.LinkUpdate) {
	defer close(w.exited)
	for {
		u, ok := <-ch
		if !ok {
			select {
			case <-w.done:
				return
			default:
			}
			// The socket failed (an overrun drops notifications):
			// subscribe again and read the state afresh, which may
			// have changed unannounced. If that fails the state
			// stays as it was last seen.
			if ch, _ = w.subscribe(); ch == nil {
				return
			}
			if l, err := w.nl.LinkByIndex(w.iface.Index); err == nil {
				w.set(LinkUp(l.Attrs()))
			} else if errors.As(err, new(netlink.LinkNotFoundError)) {
				w.set(false)
			}
			continue
		}
		if int(u.Index) != w.iface.Index {
			continue
		}
		select {
		case <-w.done:
			continue // draining
		default:
		}
		w.set(u.Header.Type != unix.RTM_DELLINK && LinkUp(u.Attrs()))
	}
}

func (w *LinkWatch) set(up bool) {
	if w.up.Swap(up) == up {
		return
	}
	if w.onChange != nil {
		w.onChange(up)
	}
}

// Up reports whether the interface is up with carrier, as last seen.
func (w *LinkWatch) Up() bool { return w.up.Load() }

// Interface returns the interface followed.
func (w *LinkWatch) Interface() Interface { return w.iface }

// Close ends the subscription and returns once the watch's goroutine has
// (OnChange is not called after). It may be called more than once.
func (w *LinkWatch) Close() error {
	w.closeOnce.Do(func() {
		close(w.done)
		<-w.exited
		w.nl.Close()
		w.ns.Close()
	})
	return nil
}
