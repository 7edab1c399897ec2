package netdev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/uroce/uroce/verbs"
)

// ErrNoInterface means no interface is up with an address.
var ErrNoInterface = errors.New("no interface with an address")

// Open opens a device as the pingpong programs' -d flag picks it: on the
// address or interface named, else, for a client (peer set), on the
// address that routes to peer, else on the first interface that is up and
// has an address.
func Open(name, peer string) (*verbs.Device, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return verbs.OpenAddr(a, verbs.Inline())
	}
	if name != "" {
		return verbs.OpenInterface(name, verbs.Inline())
	}
	if peer != "" {
		return OpenToward(peer)
	}
	return OpenFirstUp("-d")
}

// OpenAddr opens a device on an address given as text.
func OpenAddr(s string) (*verbs.Device, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, fmt.Errorf("bad address %q: %w", s, err)
	}
	return verbs.OpenAddr(a.Unmap(), verbs.Inline())
}

// OpenToward opens a device on the source address the kernel routes to
// host by.
func OpenToward(host string) (*verbs.Device, error) {
	// Connecting a UDP socket sends nothing; it asks the kernel which
	// source address routes to the host.
	c, err := net.Dial("udp", net.JoinHostPort(host, "4791"))
	if err != nil {
		return nil, fmt.Errorf("route to %s: %w", host, err)
	}
	a := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	return verbs.OpenAddr(a, verbs.Inline())
}

// OpenFirstUp opens a device on the first interface, other than loopback,
// that is up and has an address. If there is none, the error is
// ErrNoInterface and names flag as the way to name one.
func OpenFirstUp(flag string) (*verbs.Device, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		if d, err := verbs.OpenInterface(ifi.Name, verbs.Inline()); err == nil {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: name one with %s", ErrNoInterface, flag)
}

// OpenCM opens a device as the rdma_cm programs' flags pick it: on bind
// (their -b) if set, else, for a client, on the address that routes to
// server (their -s). A server must name its address: uroce binds one.
func OpenCM(bind, server string) (*verbs.Device, error) {
	if bind != "" {
		return OpenAddr(bind)
	}
	if server == "" {
		return nil, errors.New("the server needs -b (uroce binds one address)")
	}
	dst, err := Resolve(server, 0)
	if err != nil {
		return nil, err
	}
	return OpenToward(dst.Addr().String())
}

// Resolve turns a host (a name or an IP address) and a port into the
// address to connect to, as rping's and cmatose's get_addr
// (getaddrinfo, first answer).
func Resolve(host string, port int) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("getaddrinfo failed: %v", err)
	}
	a, _ := netip.AddrFromSlice(ips[0])
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}
