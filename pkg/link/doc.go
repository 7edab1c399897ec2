// Package link moves RoCEv2 packets in and out of the machine.
//
// A Link carries RoCE packets: the UDP payload of RoCEv2, from the BTH to the
// ICRC. Every packet buffer keeps Headroom bytes in front of the BTH so that a
// backend can write Ethernet, VLAN, IP and UDP headers in place, with no copy,
// and so that a backend which cannot see the real headers (the kernel UDP
// socket) can lay down the headers the kernel writes and compute the ICRC over
// them.
//
// Buffers belong to the link. The transport takes empty buffers with Alloc,
// writes a packet at Buf[Off:Off+Len] (leaving the last four bytes for the
// ICRC) and hands them back with Send, which always takes ownership. Received
// packets come out of Recv and go back with Release. The link computes the
// ICRC on send and verifies it on receive; a packet whose ICRC is wrong is
// counted and dropped, never delivered.
//
// Backends live in sub-packages: udp (a kernel UDP socket, the unprivileged
// default), afpacket (raw AF_PACKET), afxdp (AF_XDP rings) and pipe (an
// in-memory pair with a seeded fault injector for tests and the simulator).
// The first three register by name (Register), so a program opens one with
// Open(name, cfg) and names the backend nowhere else.
//
// A Link is not safe for concurrent use: one engine loop owns it, as the
// design requires (no locks on the data path). Close may be called from any
// goroutine to unblock Wait; it returns once the owner has left whatever
// call it was in, and only then frees the link's sockets and memory (the
// kernel-backed links fence the owner with an atomic state word, see
// pkg/link/internal/waiter, and panic if two goroutines use the data path
// at once rather than corrupt their buffers).
package link
