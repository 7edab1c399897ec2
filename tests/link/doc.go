// Package link is the cross-backend suite of the link layer: every backend
// exchanges RoCE packets with every backend (itself included) across a
// veth pair joining two namespaces, in both directions, over IPv4 and
// IPv6, at MTU 1500 and 9000, with the ICRC verified on arrival, and every
// resource (file descriptors included) released on Close. It needs root and
// is skipped otherwise.
//
// Backends register themselves in the table from their own file (udp_test.go,
// afpacket_test.go); a new backend adds one file with one register call.
package link
