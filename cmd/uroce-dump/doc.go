// Command uroce-dump is a RoCE-aware packet printer, a small tshark for
// RoCEv2: it reads a pcap or pcapng file, or captures live from an
// interface, and prints one line per RoCE packet with every transport
// header decoded, then optionally a summary per flow.
//
// Usage:
//
//	uroce-dump -r FILE [flags]             read a capture file
//	uroce-dump -i IFACE [-w FILE] [flags]  capture live (AF_PACKET, root)
//
// A line holds the frame number, the time since the first frame, the IP
// addresses, the opcode, the destination QP, the PSN, the BTH flags that
// are set (ackreq, se, fecn, becn) and "ce" when the IP header is marked
// Congestion Experienced, each extension header the opcode carries
// (RETH va/rkey/len; AETH with its syndrome decoded as ACK with credits,
// RNR NAK with its timer, or NAK with its code, and the MSN; AtomicETH;
// AtomicAckETH; ImmDt; IETH; DETH; RDETH; FETH), the payload length and
// whether the ICRC is right ("icrc=BAD" with the ICRC carried and the right
// one). "udp_checksum=BAD" marks a packet whose sender set a UDP checksum
// that is wrong; rxe sends none, and frames captured on the sending host
// can show it when the NIC fills the checksum in later. Frames that are not RoCE (ARP, TCP, other
// UDP) are skipped. A frame sent to UDP port 4791 that does not decode
// prints "MALFORMED" and bth's error, which says exactly what is wrong.
//
// Flags:
//
//	-r FILE      read FILE (pcap or pcapng; Ethernet, raw IP or Linux cooked)
//	-i IFACE     capture from IFACE until interrupted (or -c packets)
//	-w FILE      also write the frames shown (every frame when no filter
//	             is set) to FILE, in pcap format
//	-c N         stop after N RoCE packets have been shown
//	--qp QPN     show only packets to this QP, and the reverse direction of
//	             its connection (see below)
//	--class C    show only these operation classes, comma separated: send,
//	             write, read, atomic, ack, cnp, ud, flush. read includes
//	             READ responses, atomic includes ATOMIC Acknowledge (which
//	             ack also matches), send includes UD sends.
//	--stats      after the packets, print a summary per flow
//	-q           do not print packets (with --stats: the summary only)
//	--json       print JSON lines instead of text: one object per packet,
//	             and with --stats one object holding the summary
//
// QP pairs. The BTH names only the destination QP, so the QP at the other
// end of a connection is learnt from the stream: when a response (an ACK,
// a READ response, an ATOMIC Acknowledge) from B to A carries the PSN of a
// request from A to B to QP X, the response's destination QP is X's peer;
// a UD packet's DETH names its source QP directly. --qp X then also shows
// packets from B to A addressed to X's peer. When reading a file the whole
// file is scanned for pairs first, so the requests before the first
// response are shown too; when capturing live, the reverse direction shows
// from the first response on. Malformed packets are shown only when no
// filter is set.
//
// Statistics are per flow, a flow being (source IP, destination IP,
// destination QP), the packets of one direction of a connection: packets,
// frame bytes, payload bytes, requests, ACKs, NAKs by code, RNR NAKs,
// retransmissions, CNPs, packets marked CE and ICRC errors. A request
// counts as a retransmission when its PSN repeats one already seen in the
// flow, or lies further back than the last 1024 PSNs. A PSN going back
// to PSNs never sent (a requester restarting its sequence after a probe)
// is not counted. Statistics cover the packets the filters let through.
package main
