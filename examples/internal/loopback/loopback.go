// Package loopback opens pairs of uroce devices on loopback addresses with
// the kernel UDP backend, for the examples' programs and tests: no root, no
// namespace, nothing leaves the host.
package loopback

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
)

// Addresses the two devices bind: distinct loopback addresses, so each has
// its own socket on the same port (both sides send to the port they bind).
var (
	A = netip.MustParseAddr("127.0.0.1")
	B = netip.MustParseAddr("127.0.0.2")
)

// PortUsage is the help text of a -port flag that picks Open's port.
const PortUsage = "UDP port both devices use (0: a free one)"

// ErrNoPort means no free UDP port was found for a pair.
var ErrNoPort = errors.New("no free port for a loopback pair")

// Pair opens devices on A and B with the given port; port 0 picks a free
// one (tests use that so they never meet another stack on 4791).
func Pair(port uint16) (a, b *verbs.Device, err error) {
	if port != 0 {
		return open(port)
	}
	// A port the kernel reports free on A may be taken on B, or by the time
	// we bind it: try a few.
	for range 20 {
		p, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		if a, b, err = open(p); err == nil {
			return a, b, nil
		}
	}
	return nil, nil, ErrNoPort
}

func open(port uint16) (*verbs.Device, *verbs.Device, error) {
	la, err := udp.Open(udp.Config{Addr: A, Port: port})
	if err != nil {
		return nil, nil, fmt.Errorf("loopback pair: %w", err)
	}
	lb, err := udp.Open(udp.Config{Addr: B, Port: port})
	if err != nil {
		la.Close()
		return nil, nil, fmt.Errorf("loopback pair: %w", err)
	}
	return verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline()), nil
}

func freePort() (uint16, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(A, 0)))
	if err != nil {
		return 0, fmt.Errorf("loopback pair: %w", err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

// Open is the start of a program that runs both ends in one process
// (examples/kv, examples/rpc): it opens a pair on port (0: a free one) and,
// with metricsAddr set, serves both devices' metrics, labelled client (A)
// and server (B), printing the page's address to out. close closes all of
// it.
func Open(port uint16, metricsAddr string, out io.Writer) (client, server *verbs.Device, close func(), err error) {
	client, server, err = Pair(port)
	if err != nil {
		return nil, nil, nil, err
	}
	ms, err := metricsflag.Serve(metricsAddr, out, map[string]*verbs.Device{"client": client, "server": server})
	if err != nil {
		client.Close()
		server.Close()
		return nil, nil, nil, err
	}
	return client, server, func() {
		ms.Close()
		server.Close()
		client.Close()
	}, nil
}
