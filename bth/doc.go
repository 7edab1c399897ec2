// Package bth is the RoCEv2 wire format: the InfiniBand Base Transport
// Header, its extension headers, the opcode table, packet sequence numbers,
// the invariant CRC, and the Ethernet, IP and UDP headers that carry them.
//
// Headers are views over byte slices, as gVisor's header package writes
// them: BTH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH, RDETH,
// FETH, the CNP body and the lower Ethernet, VLAN, IPv4, IPv6 and UDP
// headers have accessors over named field offsets that read the bytes in
// place, and an Encode method that writes them in place from a Fields
// struct. Nothing here allocates on the packet path. The header lengths,
// port 4791 and the one RFC 1071 checksum are defined here and nowhere
// else.
//
// Which extension headers follow the BTH, and where, is data: the opcode
// table (opcode.go) has one entry per opcode, like rxe's rxe_opcode.c, and
// every header access goes through it.
//
// To read a packet, call Packet.Decode on the UDP payload (BTH through ICRC)
// or Frame.Decode on a whole Ethernet or IP frame; they check every length
// first and never panic, so the accessors that follow are safe. Errors say
// precisely what is wrong and match the sentinels below with errors.Is.
//
// To write a packet, encode PacketFields into a buffer (headers, payload,
// pad, room for the ICRC), lay the lower headers in front of it
// (PutDatagramHeaders), and call PutICRC over the IP datagram. Links check
// a received datagram's IP and UDP headers with ParseDatagram, which
// returns a bare sentinel.
//
// This package imports only the standard library.
package bth

import "errors"

// Errors returned by the decoders. They are wrapped with detail; test for
// them with errors.Is.
var (
	// ErrTruncated means the bytes end before a header or the ICRC does.
	ErrTruncated = errors.New("truncated packet")
	// ErrBadVersion means the BTH transport version (TVer) is not 0.
	ErrBadVersion = errors.New("bad transport header version")
	// ErrUnknownOpcode means the BTH opcode is not one this package knows.
	ErrUnknownOpcode = errors.New("unknown opcode")
	// ErrBadPad means the pad count does not fit the payload, or the
	// payload and pad are not a whole number of 4-byte words.
	ErrBadPad = errors.New("bad pad count")
	// ErrBadLength means a packet carries payload its opcode does not
	// allow, or a length field disagrees with the bytes present.
	ErrBadLength = errors.New("bad length")
	// ErrBadChecksum means a UDP checksum is present and wrong.
	ErrBadChecksum = errors.New("bad UDP checksum")
	// ErrBadICRC means the invariant CRC does not match the packet.
	ErrBadICRC = errors.New("bad ICRC")
	// ErrNotRoCE means the frame is not RoCEv2: not IP, not UDP, not to
	// port 4791, or fragmented. ParseDatagram returns it, unwrapped, for
	// any datagram it refuses.
	ErrNotRoCE = errors.New("not a RoCEv2 packet")
	// ErrBadIPHeader means the IP header is malformed.
	ErrBadIPHeader = errors.New("bad IP header")
)
