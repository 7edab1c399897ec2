// Package afxdp is a link.Link over AF_XDP: RoCEv2 frames move between the
// NIC and the UMEM of package xdp's sockets, steered there by package bpf's
// XDP program, with no kernel network stack on the path.
//
// # Buffers
//
// Each queue's UMEM is split in two. The first part is receive chunks: they
// sit on the Fill ring, come back on RX, are handed out by Recv in place
// (the packet is read where the kernel wrote it) and go back on Fill when
// released. The second part is transmit spans, each as many consecutive
// chunks as the largest frame needs: Alloc hands out a span with Headroom
// bytes in front of the BTH; Send writes the Ethernet, IPv4 or IPv6 and UDP
// headers into that headroom, computes the ICRC (and, for IPv6, the UDP
// checksum) and queues the frame on TX, cut at chunk boundaries into a chain
// of descriptors marked XDP_PKT_CONTD when it is larger than one chunk. The
// span is free again when all its descriptors have completed.
//
// A received frame larger than a chunk arrives as a descriptor chain in
// separate chunks; Recv copies it into a free span so the packet is one
// contiguous slice, and recycles the chunks at once.
//
// # Addresses
//
// The source address is Config.Addr or the interface's first address. The
// next hop's MAC address is Config.NeighborMAC when set, otherwise asked of
// pkg/netinfo, whose per-destination cache makes the lookup a map read on
// the packet path; a destination not yet resolved is learnt in the
// background while Send drops its packets with link.ErrResolving.
//
// # Waiting
//
// WaitPoll sleeps in poll(2). WaitBusyPoll spins, making recvfrom calls that
// run the device's NAPI when SO_BUSY_POLL is on. WaitHybrid spins for
// Config.Spin, then sleeps in poll.
//
// A Link is a link.Waker: Wake ends a Wait from another goroutine (a flag
// for a spinning Wait, the waiter's eventfd for one asleep in poll), so
// verbs hands work to an engine asleep in the link without polling it.
//
// A Link is not safe for concurrent use, except that Close may be called
// from another goroutine to end a Wait.
package afxdp
