// Package mad is the wire format of InfiniBand management datagrams as the
// connection manager uses them: the 24-byte common MAD header (IBA 13.4.2),
// the CM class's attributes and the messages of IBA 12.6 (REQ, MRA, REJ,
// REP, RTU, DREQ, DREP, LAP, APR, SIDR_REQ, SIDR_REP), and the header
// rdma_cm puts at the front of a REQ's private data (struct cma_hdr in the
// kernel's cma.c) with the IP CM service IDs it connects to. Caps are
// uroce's own capabilities, which a REQ and a REP carry in reserved bits
// that ib_cm ignores.
//
// On RoCEv2 a MAD travels as the whole payload of a UD SEND Only packet
// (BTH opcode 0x64) to QP1, the general services interface, with a DETH
// carrying the well-known GSI Q_Key 0x80010000 (IBA 13.5.2); nothing is
// prepended, so the UD payload is the 256-byte MAD itself.
//
// As in package bth, everything is a view over a byte slice: MAD is the
// whole datagram, Header its first 24 bytes, and REQ, REP, ... are views of
// the 232 data bytes after the header (MAD.Data), so their field offsets
// are the byte offsets the IBA tables give (Table 106 onwards). Every view
// has accessors that read in place, a Fields method that returns a plain
// struct, and an Encode method that writes every field from one, zeroing
// reserved bits; Encode and the accessors allocate nothing.
//
// To read a MAD, call DecodeCM on the UD payload first: it checks the
// length, base version, class, class version, method and attribute, so the
// views that follow are in bounds. To write one, take a 256-byte buffer,
// call MAD.EncodeHeader (or NewCM), then the message view's Encode.
//
// Private data in a Fields struct is a view into the MAD it came from;
// Encode copies at most the message's private data length and zero-fills
// the rest, so callers check lengths against the PrivateDataLen constants.
//
// This package imports only the standard library.
package mad
