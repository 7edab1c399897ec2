// Package bpf holds the XDP program that steers RoCEv2 into AF_XDP sockets.
//
// The program (xdp.c, compiled by bpf2go into the committed uroce_bpfel.o)
// looks at each frame's Ethernet header, at most one 802.1Q tag, and the
// IPv4 or IPv6 header. A UDP datagram to port 4791 is redirected into the
// XSKMAP entry of the receive queue it arrived on; everything else (ARP, ND,
// ICMP, TCP, other UDP, IP fragments, IPv6 with extension headers) is passed
// to the kernel stack, so the interface keeps working for ordinary traffic.
// If no socket is registered for the queue, RoCE frames are passed too
// (bpf_redirect_map with XDP_PASS as its fallback), so a kernel UDP socket
// still sees them.
//
// Attach loads the program and links it to an interface with a BPF link
// (cilium/ebpf link.AttachXDP), not with netlink: the kernel detaches a BPF
// link when its last file descriptor is closed, so a crashed or killed
// process never leaves the interface black-holing RoCE. Native (driver)
// mode is tried first and generic (skb) mode is the fallback.
//
// The program is built as SEC("xdp.frags") and so loaded with
// BPF_F_XDP_HAS_FRAGS: it only reads headers, which are in the first buffer,
// and declaring it lets veth run it natively on an MTU-9000 interface and
// lets multi-buffer frames reach AF_XDP sockets bound with XDP_USE_SG.
package bpf
