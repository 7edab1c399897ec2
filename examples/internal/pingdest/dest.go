package pingdest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MsgSize is the address message: "%04x:%06x:%06x:%s", the LID, QPN, PSN
// and the GID as 32 hex digits, plus its NUL (52 bytes; see
// testdata/rxe-captures/ibv_rc_pingpong.pcap and ibv_ud_pingpong.pcap).
const MsgSize = len("0000:000000:000000:00000000000000000000000000000000") + 1

// Done is what the client writes after reading the server's message (with
// its NUL, as C's sizeof "done").
var Done = []byte("done\x00")

// ErrMessage means the peer's message is not the pingpong programs'.
var ErrMessage = errors.New("malformed address message")

// Dest is one side's address: what the peer needs to reach its QP (the
// programs' struct pingpong_dest). RC moves its QP to RTR with it; UD
// makes an address handle and ignores the PSN.
type Dest struct {
	LID uint16 // 0 on RoCE
	QPN uint32
	PSN uint32
	GID netip.Addr // IPv6, IPv4-mapped for RoCEv2 over IPv4, or :: for none
}

// Marshal formats d as the 52-byte message. The GID goes byte by byte in
// network order: rdma-core's gid_to_wire_gid writes each 32-bit word with
// htobe32, which on any host gives the GID's bytes as they sit in memory.
func (d Dest) Marshal() [MsgSize]byte {
	var m [MsgSize]byte
	gid := d.GID.As16()
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xffffff, d.PSN&0xffffff, hex.EncodeToString(gid[:]))
	copy(m[:], s) // the last byte stays NUL
	return m
}

// Parse reads a message as sscanf("%x:%x:%x:%s") and wire_gid_to_gid do,
// strictly: three hex fields and 32 hex digits of GID, then NUL padding.
func Parse(m []byte) (Dest, error) {
	s, _, _ := strings.Cut(string(m), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return Dest{}, fmt.Errorf("%w: %q", ErrMessage, s)
	}
	var v [3]uint64
	for i, bits := range []int{16, 24, 24} {
		n, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return Dest{}, fmt.Errorf("%w: %q", ErrMessage, s)
		}
		v[i] = n
	}
	var gid [16]byte
	if _, err := hex.Decode(gid[:], []byte(f[3])); err != nil {
		return Dest{}, fmt.Errorf("%w: %q", ErrMessage, s)
	}
	return Dest{LID: uint16(v[0]), QPN: uint32(v[1]), PSN: uint32(v[2]), GID: netip.AddrFrom16(gid)}, nil
}

// String prints d as the programs' "remote address:" line does.
func (d Dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %v", d.LID, d.QPN, d.PSN, d.GID)
}
