// Package afxdp holds tests that exercise the AF_XDP link across veth pairs in
// throw-away network namespaces: afxdp to afxdp and to kernel UDP, both
// directions, MTU 1500 and 9000, IPv4 and IPv6; ordinary traffic (ARP, TCP)
// alongside the XDP program; detaching when the owning process is killed;
// and release of every resource on Close. The tests need root.
package afxdp
