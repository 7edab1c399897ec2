// Package layers teaches gopacket to decode and build RoCEv2, so that
// gopacket.NewPacket, gopacket.DecodingLayerParser and pcapgo-based tools
// understand the packets package bth describes. It lives apart from bth so
// that the wire format itself keeps no dependency outside the standard
// library.
//
// Importing the package registers one layer type, LayerTypeRoCE (number
// 1000), and binds UDP port 4791 to it with layers.RegisterUDPPortLayerType.
// A RoCE layer is everything the UDP datagram carries: the BTH, the
// extension headers its opcode names (RETH, AETH, AtomicETH, AtomicAckETH,
// ImmDt, IETH, DETH, RDETH, FETH, the CNP body), the payload, the pad and
// the ICRC. One layer rather than one per header keeps DecodingLayerParser
// set-up to a single decoder and matches how the opcode table, not a chain
// of "next header" fields, says which headers follow. Its LayerContents are
// the BTH and extension headers, its LayerPayload the payload without pad,
// decoded next as gopacket.LayerTypePayload.
//
// Decoding goes through bth.Packet.Decode, so the checks and errors are
// bth's (test them with errors.Is against bth.ErrTruncated and the rest),
// and DecodeFromBytes overwrites the layer in place without allocating.
//
// The ICRC covers the IP header, which a layer decoder does not see.
// gopacket.NewPacket checks it automatically (the packet being built
// already holds the IP layer); after DecodingLayerParser, call
// RoCE.CheckICRC with the IPv4 or IPv6 layer that carried the packet. The
// outcome is in RoCE.ICRCStatus.
//
// To build packets, SerializeTo writes the headers in front of the payload
// and the pad and ICRC after it; since the ICRC depends on the IP header,
// which is serialized later, use this package's SerializeLayers, which runs
// gopacket.SerializeLayers and then fills the ICRC in.
package layers
