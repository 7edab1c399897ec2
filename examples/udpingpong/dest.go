package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// msgSize is ibv_ud_pingpong's address message: "%04x:%06x:%06x:%s", the
// LID, QPN, PSN and the GID as 32 hex digits, plus its NUL (52 bytes; see
// testdata/rxe-captures/ibv_ud_pingpong.pcap).
const msgSize = len("0000:000000:000000:00000000000000000000000000000000") + 1

// done is what the client writes after reading the server's message
// (with its NUL, as C's sizeof "done").
var done = []byte("done\x00")

// errMessage means the peer's message is not ibv_ud_pingpong's.
var errMessage = errors.New("malformed address message")

// dest is one side's address: what the peer needs to reach its QP
// (ud_pingpong.c's struct pingpong_dest). The PSN is carried but unused:
// UD receivers do not check PSNs.
type dest struct {
	LID uint16 // 0 on RoCE
	QPN uint32
	PSN uint32
	GID netip.Addr // IPv6, IPv4-mapped for RoCEv2 over IPv4, or :: for none
}

// marshal formats d as the 52-byte message; the GID goes byte by byte in
// network order (rdma-core's gid_to_wire_gid writes each 32-bit word with
// htobe32, which gives the bytes as they sit in memory).
func (d dest) marshal() [msgSize]byte {
	var m [msgSize]byte
	gid := d.GID.As16()
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xffffff, d.PSN&0xffffff, hex.EncodeToString(gid[:]))
	copy(m[:], s) // the last byte stays NUL
	return m
}

// parseDest reads a message as sscanf("%x:%x:%x:%s") does, strictly: three
// hex fields and 32 hex digits of GID, then NUL padding.
func parseDest(m []byte) (dest, error) {
	s, _, _ := strings.Cut(string(m), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return dest{}, fmt.Errorf("%w: %q", errMessage, s)
	}
	var v [3]uint64
	for i, bits := range []int{16, 24, 24} {
		n, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return dest{}, fmt.Errorf("%w: %q", errMessage, s)
		}
		v[i] = n
	}
	var gid [16]byte
	if _, err := hex.Decode(gid[:], []byte(f[3])); err != nil {
		return dest{}, fmt.Errorf("%w: %q", errMessage, s)
	}
	return dest{LID: uint16(v[0]), QPN: uint32(v[1]), PSN: uint32(v[2]), GID: netip.AddrFrom16(gid)}, nil
}

// String prints d as ibv_ud_pingpong's address lines do.
func (d dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %v", d.LID, d.QPN, d.PSN, d.GID)
}

// exchangeClient is the client's half: write our message, read the
// server's, write "done". The server has its address handle by the time
// its message arrives.
func exchangeClient(rw io.ReadWriter, local dest) (dest, error) {
	m := local.marshal()
	if _, err := rw.Write(m[:]); err != nil {
		return dest{}, fmt.Errorf("send local address: %w", err)
	}
	if _, err := io.ReadFull(rw, m[:]); err != nil {
		return dest{}, fmt.Errorf("read remote address: %w", err)
	}
	remote, err := parseDest(m[:])
	if err != nil {
		return dest{}, err
	}
	if _, err := rw.Write(done); err != nil {
		return dest{}, fmt.Errorf("send done: %w", err)
	}
	return remote, nil
}

// exchangeServer is the server's half: read the client's message, get
// ready to send to it (connect), write our message and read "done".
func exchangeServer(rw io.ReadWriter, local dest, connect func(remote dest) error) (dest, error) {
	var m [msgSize]byte
	if _, err := io.ReadFull(rw, m[:]); err != nil {
		return dest{}, fmt.Errorf("read remote address: %w", err)
	}
	remote, err := parseDest(m[:])
	if err != nil {
		return dest{}, err
	}
	if err := connect(remote); err != nil {
		return dest{}, err
	}
	m = local.marshal()
	if _, err := rw.Write(m[:]); err != nil {
		return dest{}, fmt.Errorf("send local address: %w", err)
	}
	var d [len("done\x00")]byte
	if _, err := io.ReadFull(rw, d[:]); err != nil {
		return dest{}, fmt.Errorf("read done: %w", err)
	}
	return remote, nil
}
