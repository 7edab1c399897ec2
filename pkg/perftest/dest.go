package perftest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Dest is one side's QP details as perftest sends them (struct
// pingpong_dest, KEY_PRINT_FMT_GID).
type Dest struct {
	LID uint16
	// OutReads is the initiator depth offered for READ and atomics
	// (perftest sends 1 for write and send tests, 0x80 for read/atomic).
	OutReads uint16
	QPN      uint32
	// PSN is where the sender starts its send queue; the peer sets its
	// receive PSN to it.
	PSN   uint32
	RKey  uint32
	VAddr uint64
	GID   [16]byte
	SRQN  uint32
	// GIDIndex is the sender's GID index; only the binary form of the
	// rdma_cm exchange carries it (PutBinary).
	GIDIndex int32
}

// GIDAddr returns the GID as an address (IPv4-mapped for RoCEv2 over IPv4).
func (d Dest) GIDAddr() netip.Addr { return netip.AddrFrom16(d.GID) }

// String formats the message as sent, without its trailing NUL.
func (d Dest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	for _, g := range d.GID {
		fmt.Fprintf(&b, "%02x:", g)
	}
	fmt.Fprintf(&b, "%08x:", d.SRQN)
	return b.String()
}

func (d Dest) put(b []byte) {
	clear(b)
	copy(b, d.String())
}

// ParseDest parses a 108-byte Dest message.
func ParseDest(b []byte) (Dest, error) {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	// lid, out_reads, qpn, psn, rkey, vaddr, 16 GID bytes, srqn, and the
	// empty string after the last colon.
	if len(f) != 6+16+1+1 || f[len(f)-1] != "" {
		return Dest{}, fmt.Errorf("perftest: %w: %d fields in %q", ErrProtocol, len(f), s)
	}
	var d Dest
	var err error
	num := func(s string, bits int) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = strconv.ParseUint(s, 16, bits)
		return v
	}
	d.LID = uint16(num(f[0], 16))
	d.OutReads = uint16(num(f[1], 16))
	d.QPN = uint32(num(f[2], 24))
	d.PSN = uint32(num(f[3], 24))
	d.RKey = uint32(num(f[4], 32))
	d.VAddr = num(f[5], 64)
	for i := range 16 {
		d.GID[i] = byte(num(f[6+i], 8))
	}
	d.SRQN = uint32(num(f[22], 32))
	if err != nil {
		return Dest{}, fmt.Errorf("perftest: %w: %q: %v", ErrProtocol, s, err)
	}
	return d, nil
}
