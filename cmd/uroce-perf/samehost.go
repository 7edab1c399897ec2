package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/uroce/uroce/bth"
)

// Both ends on one host. The udp link binds UDP port 4791 on one address,
// so two devices on one host need two addresses; rdma_cm (-R) sends its
// REQ to the peer's address, so the client must not sit on it, or the REQ
// comes back to its own CM, which answers "invalid service ID".

// roceHolder says whether a is one of this host's addresses (bindable)
// and whether something already holds RoCE's UDP port on it: a uroce
// device, or rxe's socket on the wildcard address.
func roceHolder(a netip.Addr) (local, held bool) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, bth.RoCEPort)))
	if err == nil {
		c.Close()
		return true, false
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return true, true
	}
	return false, false
}

// besidePeer picks a client's address when its peer is on this host: the
// address the kernel would send from (src), unless that is the peer's own
// or held, then a loopback address whose RoCE port is free. Linux delivers
// between any two local addresses over lo, so either reaches the peer.
func besidePeer(peer, src netip.Addr) netip.Addr {
	if src != peer {
		if _, held := roceHolder(src); !held {
			return src
		}
	}
	cands := []netip.Addr{netip.IPv6Loopback()}
	if peer.Is4() {
		cands = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.AddrFrom4([4]byte{127, 0, 0, 2})}
	}
	for _, a := range cands {
		if a == peer {
			continue
		}
		if local, held := roceHolder(a); local && !held {
			return a
		}
	}
	return src
}

// checkCMPeer fails at once a -R client whose peer is on this host with no
// device of its own there: the client's own address (own; picked says
// localAddr chose it, which it does only when nothing else held the RoCE
// port there) or one whose RoCE port nothing holds. Elsewhere the CM's REJ
// or silence says it.
func checkCMPeer(peer, own netip.Addr, picked bool) error {
	free := peer == own && picked
	if peer != own {
		local, held := roceHolder(peer)
		free = local && !held
	}
	switch {
	case free:
		return fmt.Errorf("-R: no RoCE device listens on %v, this host's address (nothing holds UDP port %d there): start the server with -R first, or give the address of its device (its -d interface's, or its --ip)", peer, bth.RoCEPort)
	case peer == own:
		return fmt.Errorf("-R: %v is this client's own address, so its connection request would come back to itself: give the address of the server's device (its -d interface's, or its --ip)", peer)
	}
	return nil
}
