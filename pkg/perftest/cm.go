package perftest

import (
	"encoding/binary"
	"fmt"
	"io"
)

// DestBinaryLen is the size of the Dest message of the rdma_cm exchange:
// perftest's struct pingpong_dest as it lies in memory on x86-64 (five
// 32-bit fields, 4 bytes of padding, vaddr, the GID, srqn and gid_index).
const DestBinaryLen = 56

// Offsets in the binary Dest (struct pingpong_dest).
const (
	binLID      = 0
	binOutReads = 4
	binQPN      = 8
	binPSN      = 12
	binRKey     = 16
	binVAddr    = 24
	binGID      = 32
	binSRQN     = 48
	binGIDIndex = 52
)

// NewCMConn returns a Conn for perftest's rdma_cm exchange (-R and -z):
// rw carries each step as one message, an RC SEND over the connection
// rdma_cm made (perftest's rdma_write_data and rdma_read_data), in the
// same order and sizes as over TCP, except that the Dest message is the
// 56-byte binary struct (PutBinary) instead of the 108-byte text, and the
// exchange ends without "done". rw's Write must send its argument as one
// message and Read return one whole message.
func NewCMConn(rw io.ReadWriter, client bool) *Conn {
	return &Conn{rw: rw, client: client, binary: true}
}

// PutBinary writes d as the rdma_cm exchange sends it (rdma_write_keys,
// built with HAVE_ENDIAN): every field big-endian, the GID as is. b must
// hold DestBinaryLen bytes.
func (d Dest) PutBinary(b []byte) {
	b = b[:DestBinaryLen]
	clear(b)
	binary.BigEndian.PutUint32(b[binLID:], uint32(d.LID))
	binary.BigEndian.PutUint32(b[binOutReads:], uint32(d.OutReads))
	binary.BigEndian.PutUint32(b[binQPN:], d.QPN)
	binary.BigEndian.PutUint32(b[binPSN:], d.PSN)
	binary.BigEndian.PutUint32(b[binRKey:], d.RKey)
	binary.BigEndian.PutUint64(b[binVAddr:], d.VAddr)
	copy(b[binGID:binGID+16], d.GID[:])
	binary.BigEndian.PutUint32(b[binSRQN:], d.SRQN)
	binary.BigEndian.PutUint32(b[binGIDIndex:], uint32(d.GIDIndex))
}

// ParseDestBinary parses a binary Dest message. Like rdma_read_keys it
// takes every field; values too wide for the text form's fields (a LID
// above 16 bits, a QPN or PSN above 24) are a protocol error.
func ParseDestBinary(b []byte) (Dest, error) {
	if len(b) != DestBinaryLen {
		return Dest{}, fmt.Errorf("perftest: %w: binary dest of %d bytes, want %d", ErrProtocol, len(b), DestBinaryLen)
	}
	u32 := func(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
	lid, reads, qpn, psn := u32(binLID), u32(binOutReads), u32(binQPN), u32(binPSN)
	if lid > 0xffff || reads > 0xffff || qpn > 0xffffff || psn > 0xffffff {
		return Dest{}, fmt.Errorf("perftest: %w: binary dest lid %#x out_reads %#x qpn %#x psn %#x out of range",
			ErrProtocol, lid, reads, qpn, psn)
	}
	d := Dest{LID: uint16(lid), OutReads: uint16(reads), QPN: qpn, PSN: psn, RKey: u32(binRKey),
		VAddr: binary.BigEndian.Uint64(b[binVAddr:]), SRQN: u32(binSRQN), GIDIndex: int32(u32(binGIDIndex))}
	copy(d.GID[:], b[binGID:binGID+16])
	return d, nil
}
