// Package rawbench measures the floors that uroce's links and uroce-perf
// are compared against, on a veth pair between two namespaces made with
// internal/netns: plain kernel UDP sockets (one sendto and one busy-polled
// recvfrom per datagram) and a bare AF_XDP socket (afxdp.Raw: frames
// written once, then moved as descriptors only). Each floor is a busy-polled
// ping-pong (round-trip min, median and p99) and a one-way blast (packets/s
// and Gbit/s received, and the share lost), of datagrams as large as a RoCE
// packet with the given payload.
//
// The RC-shaped floor (XDPRC) is the one an RC transport is held to: on
// the same bare AF_XDP sockets it sends the packets of an RC write_lat
// round trip (WRITE in IB-MTU packets, ACK, the reply WRITE, its ACK) as
// real RoCEv2 frames, each re-stamped with its PSN and a fresh ICRC, and
// decodes and verifies every frame it receives.
//
// uroce-linkbench and `uroce-perf bench` both call it, so a ratio printed by
// either is taken against the same code.
package rawbench
