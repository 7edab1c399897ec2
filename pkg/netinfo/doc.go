// Package netinfo answers the questions a link that writes its own Ethernet
// and IP headers must ask the kernel: which interface and source address
// reach a destination, through which gateway, and what is the next hop's MAC
// address. It also lists the RoCEv2 GID table of the machine's interfaces,
// laid out as rxe's is.
//
// A Resolver talks rtnetlink (github.com/vishvananda/netlink) in one network
// namespace. Lookup asks for the route (RTM_GETROUTE), then for the next
// hop's neighbour entry; when the kernel has none, or only a failed or
// incomplete one, it asks the kernel to resolve it, without sending a packet
// itself, by creating the neighbour entry with NTF_USE (what `ip neigh
// replace ADDR dev DEV use` does: neigh_event_send starts ARP or neighbour
// discovery), and polls until the entry is reachable or the timeout passes.
//
// Lookup may therefore block for the timeout. A packet path must not: it
// calls Resolve, which answers from the cache or starts the same lookup in
// a background goroutine (one per destination) and returns ErrPending at
// once, so the link drops the packet and the transport's retransmission
// finds the answer cached. A failed background lookup is remembered for a
// short while (FailTTL), so an unreachable peer costs a map lookup per
// packet, not a goroutine.
//
// Answers are cached per destination. Every answer is made stale whenever
// the kernel announces a change of route, neighbour or address (netlink
// multicast groups), and after a TTL in any case, so a link that asks on
// every packet pays a map lookup, and sees a changed next hop within the
// TTL at worst (within one background lookup, for Resolve).
//
// GIDs follows rxe (drivers/infiniband/core/roce_gid_mgmt.c): index 0 of each
// interface is the default GID, the link-local fe80::/64 address made from
// the MAC (EUI-64), followed by one GID per IP address on the interface:
// IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), IPv6 as itself. Every GID is of
// type "RoCE v2", the only one uroce speaks.
//
// WatchLink follows one interface's state for a RoCE port, as rxe follows
// its netdev: up means administratively up with carrier (IFF_UP and
// IFF_LOWER_UP). It subscribes to rtnetlink's link notifications and calls
// back, from its own goroutine, on each change of state; Close ends the
// subscription and the goroutine. InterfaceByAddr finds the interface that
// holds an address, for a link that knows only its address.
package netinfo
