package cnp

import (
	"fmt"

	"github.com/uroce/uroce/bth"
)

// Header values ConnectX puts around a CNP.
const (
	// DSCP is the IP DSCP of a CNP (CNP_DSCP).
	DSCP = 48
	// PCP is the 802.1p priority of a CNP on a VLAN (CNP_802P_PRIO).
	PCP = 6
	// PKey is the P_Key of a CNP: the default partition, full member.
	PKey = 0xffff
	// Len is the UDP payload of a CNP: BTH, 16 reserved bytes, ICRC.
	Len = bth.BTHLen + bth.CNPLen + bth.ICRCLen
)

// Encode writes a CNP addressed to destQP (the QP that must slow down) into
// b, with a zero ICRC for bth.PutICRC to fill, and returns its length, Len.
// It returns an error wrapping bth.ErrTruncated if b is shorter than Len.
func Encode(b []byte, destQP uint32) (int, error) {
	if len(b) < Len {
		return 0, fmt.Errorf("encode cnp: %d bytes: %w", len(b), bth.ErrTruncated)
	}
	bth.BTH(b).Encode(&bth.BTHFields{
		Opcode: bth.CNP,
		PKey:   PKey,
		BECN:   true,
		DestQP: destQP & bth.QPNMask,
	})
	clear(b[bth.BTHLen:Len])
	return Len, nil
}

// Is reports whether a decoded packet is a CNP, and the QP it asks to slow
// down. Only the opcode decides: the DSCP, P_Key and BECN are not checked,
// as ConnectX accepts CNPs from peers that set them differently.
func Is(p *bth.Packet) (destQP uint32, ok bool) {
	if p.Opcode() != bth.CNP {
		return 0, false
	}
	return p.BTH().DestQP(), true
}
