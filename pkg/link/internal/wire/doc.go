// Package wire writes and reads the IP and UDP headers that carry a RoCE
// packet inside a link buffer, for the backends that see or must imitate
// whole datagrams (pipe, udp, afpacket). It lays the headers down in place,
// in the headroom in front of the BTH, so that the ICRC can be computed and
// checked over the very bytes the wire carries, and it parses them back
// without allocating.
package wire
