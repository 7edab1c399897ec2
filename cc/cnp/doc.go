// Package cnp is the wire form of RoCEv2's Congestion Notification Packet
// as ConnectX sends it, so package cc can stay free of packets' bytes.
//
// A CNP is a BTH with opcode 0x81, P_Key 0xFFFF, BECN set, the destination
// QP the QP that must slow down, PSN 0 and no AckReq, then 16 reserved zero
// bytes and the ICRC (the RoCEv2 annex, IBA A17). It travels in an IP packet with DSCP 48
// (CNP_DSCP) and, on a VLAN, priority 6 (CNP_802P_PRIO); its ECN field is
// Not-ECT. Receivers accept a CNP whatever its DSCP, as ConnectX does.
//
// Encode writes the UDP payload; the engine lays the IP and UDP headers in
// front and calls bth.PutICRC. Decode-side, Is looks at a bth.Packet.
package cnp
