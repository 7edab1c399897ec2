package link

import (
	"errors"
	"net/netip"
	"time"

	"github.com/uroce/uroce/bth"
)

// Headroom is the space kept in front of the BTH in every buffer: Ethernet
// with one 802.1Q tag (18), IPv6 (40) and UDP (8) is 66 bytes, rounded up so
// the BTH starts on a cache line.
const Headroom = 128

// Packet is one RoCE packet in a link-owned buffer.
type Packet struct {
	// Buf is the whole buffer; the RoCE packet is Buf[Off:Off+Len] and
	// Buf[:Off] is free for lower headers.
	Buf []byte
	// Off is where the BTH starts; Alloc sets it to Headroom.
	Off int
	// Len is the length of the RoCE packet from the BTH through the ICRC.
	Len int
	// Remote is the peer's IP address: the destination on send, the source
	// on receive.
	Remote netip.Addr
	// Local is the local IP address: the source on send (zero means the
	// link's own address), the destination on receive.
	Local netip.Addr
	// SrcPort is the UDP source port: rxe derives it from the QPN for ECMP
	// entropy. Backends that cannot choose it (one kernel socket) ignore it
	// on send. Receivers must not care about it.
	SrcPort uint16
	// TOS is the IPv4 TOS / IPv6 traffic class byte: DSCP<<2 | ECN. On send
	// it is what to put on the wire; on receive it is what arrived, so a CE
	// mark (ECN 3) reaches congestion control.
	TOS uint8
	// Unverified is set on receive when the backend could not reconstruct
	// the IP header exactly enough to check the ICRC (see the backend's
	// documentation for which fields it must assume).
	Unverified bool
}

// RoCE returns the RoCE packet: BTH through ICRC.
func (p *Packet) RoCE() []byte { return p.Buf[p.Off : p.Off+p.Len] }

// ECN field values (RFC 3168) as carried in the low two bits of TOS.
const (
	ECNNotECT = 0
	ECT1      = 1
	ECT0      = 2
	ECNCE     = 3
)

// CE reports whether the packet arrived with the ECN Congestion Experienced mark.
func (p *Packet) CE() bool { return p.TOS&3 == ECNCE }

// Info describes a link.
type Info struct {
	// Kind names the backend: "udp", "afpacket", "afxdp", "pipe".
	Kind string
	// Name is the interface name, or a descriptive name for pipe links.
	Name string
	// Addr is the local IP address the link sends from; its IPv4-mapped or
	// IPv6 form is the RoCEv2 GID.
	Addr netip.Addr
	// MTU is the IP MTU of the path (1500 for plain Ethernet); the largest
	// RoCE packet it carries is MTU minus the IP and UDP headers.
	MTU int
}

// MaxRoCE returns the largest RoCE packet (BTH through ICRC) the link carries.
func (i Info) MaxRoCE() int {
	if i.Addr.Is4() || i.Addr.Is4In6() {
		return i.MTU - bth.IPv4MinLen - bth.UDPLen
	}
	return i.MTU - bth.IPv6Len - bth.UDPLen
}

// Stats are a link's counters since it was opened.
type Stats struct {
	TxPackets, TxBytes uint64
	RxPackets, RxBytes uint64
	// TxDropped counts packets handed to Send that did not go out.
	TxDropped uint64
	// RxICRCErrors counts received packets dropped for a bad ICRC.
	RxICRCErrors uint64
	// RxDropped counts received packets dropped for any other reason
	// (malformed, not RoCE, no buffer).
	RxDropped uint64
}

// Waker is implemented by links whose Wait another goroutine can cut short.
// Wake makes the Wait in progress, or else the next one, return nil at once.
// Like Close it is safe from any goroutine: it is how work handed to an
// engine loop by other goroutines reaches a loop asleep in Wait.
type Waker interface {
	Wake()
}

// Resolver is implemented by links that learn next hops themselves
// (afpacket, afxdp). Resolve learns dst's link-layer address, waiting for
// the answer a bounded moment (ResolveWait), so that the first packets sent
// to dst are not dropped with ErrResolving; if the answer is late it
// arrives in the background as usual. A QP calls it when it learns its
// peer's address (ibv_modify_qp to RTR), as the kernel resolves the
// destination MAC of a RoCE QP in modify_qp (ib_resolve_eth_dmac): a first
// window lost to resolution would cost a whole local ACK timeout
// (IBA 9.7.6.1.3) before go-back-N. It is safe from any goroutine and never
// runs on a packet path.
type Resolver interface {
	Resolve(dst netip.Addr)
}

// ResolveWait bounds how long Resolver.Resolve waits for an answer: a
// neighbour on the link answers in well under a millisecond, and an
// unreachable one must not hold up a QP's modify for the resolver's whole
// timeout.
const ResolveWait = 250 * time.Millisecond

// Link is one RoCEv2 port. See the package documentation for buffer ownership.
type Link interface {
	// Alloc fills pkts with empty transmit buffers (Off = Headroom, Len = 0,
	// addresses zero) and returns how many it could provide.
	Alloc(pkts []*Packet) int
	// Send computes each packet's ICRC, transmits the packets and takes
	// ownership of all of them, sent or not. It returns how many went out;
	// an error says why the rest did not.
	Send(pkts []*Packet) (int, error)
	// Recv fills pkts with received packets whose ICRC verified and returns
	// how many; it does not block (0, nil means nothing is waiting). The
	// caller returns them with Release.
	Recv(pkts []*Packet) (int, error)
	// Release returns received packets, or allocated ones never sent.
	Release(pkts []*Packet)
	// Wait blocks until Recv would return a packet, the timeout passes
	// (a negative timeout waits forever) or the link is closed.
	Wait(timeout time.Duration) error
	// Info describes the link.
	Info() Info
	// Stats returns the link's counters.
	Stats() Stats
	// Close releases every resource of the link; pending Waits return
	// ErrClosed.
	Close() error
}

// Errors returned by links. Backends wrap them with context.
var (
	// ErrClosed is returned by every method of a closed link.
	ErrClosed = errors.New("link closed")
	// ErrTooBig is returned by Send when a packet exceeds the link's MTU.
	ErrTooBig = errors.New("packet exceeds link MTU")
	// ErrNoRoute is returned when a destination cannot be resolved.
	ErrNoRoute = errors.New("no route to destination")
	// ErrResolving is returned by Send for packets dropped because the
	// next hop's link-layer address is still being learnt in the
	// background (the kernel's ARP or neighbour discovery). Sending again
	// later, as the transport's retransmission does, gets them through;
	// the engine loop never waits for the network.
	ErrResolving = errors.New("next hop being resolved")
	// ErrUnknownBackend is returned by Open for a name no backend has
	// registered.
	ErrUnknownBackend = errors.New("unknown link backend")
	// ErrNoInterface is returned by Open for a backend that needs
	// Config.Interface (afpacket, afxdp) when it is empty.
	ErrNoInterface = errors.New("backend needs a network interface")
)
