// Package rawbench measures the floors that uroce's links and uroce-perf
// are compared against, on a veth pair between two namespaces made with
// internal/netns: plain kernel UDP sockets (one sendto and one busy-polled
// recvfrom per datagram) and a bare AF_XDP socket (afxdp.Raw: frames
// written once, then moved as descriptors only). Each floor is a busy-polled
// ping-pong (round-trip min, median and p99) and a one-way blast (packets/s
// and Gbit/s received, and the share lost), of datagrams as large as a RoCE
// packet with the given payload.
//
// uroce-linkbench and `uroce-perf bench` both call it, so a ratio printed by
// either is taken against the same code.
package rawbench
