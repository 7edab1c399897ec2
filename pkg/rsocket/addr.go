package rsocket

import (
	"fmt"
	"net"
	"net/netip"
)

// network is the name Addr and the errors give the transport.
const network = "rsocket"

// Addr is an rsocket end: the device's IP address (its RoCEv2 GID) and
// the rdma_cm port (RDMA_PS_TCP, as rsocket binds).
type Addr struct{ netip.AddrPort }

var _ net.Addr = Addr{}

// Network returns "rsocket".
func (Addr) Network() string { return network }

// parseAddr reads "ip:port"; an empty or unspecified ip means any.
func parseAddr(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	var a netip.Addr
	if host != "" {
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, fmt.Errorf("rsocket: address %q: want an IP address: %w", s, err)
		}
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}
