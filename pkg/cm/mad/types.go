package mad

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
)

// GID is a 128-bit global identifier. On RoCEv2 it is the port's IP
// address as IPv6, IPv4 addresses IPv4-mapped (::ffff:a.b.c.d).
type GID [16]byte

// GIDFromAddr returns the GID of an IP address, mapping IPv4.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr returns the GID as an IPv6 address (IPv4-mapped for IPv4); Unmap
// it for the IPv4 form.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// IsZero reports whether every bit is zero (an absent alternate path).
func (g GID) IsZero() bool { return g == GID{} }

func (g GID) String() string { return g.Addr().String() }

// MTU is the 4-bit IB MTU code of a path (IBA 9.6.2 Table 41... the
// PathMTU of IBA 12.7.24).
type MTU uint8

// MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for a reserved code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the largest MTU code no bigger than n bytes, or 0
// when n is below 256.
func MTUFromBytes(n int) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m
		}
	}
	return 0
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// TransportService is the 2-bit transport service type of a REQ (IBA
// 12.7.11).
type TransportService uint8

// Transport services.
const (
	ServiceRC TransportService = 0
	ServiceUC TransportService = 1
	ServiceRD TransportService = 2
)

func (t TransportService) String() string {
	switch t {
	case ServiceRC:
		return "RC"
	case ServiceUC:
		return "UC"
	case ServiceRD:
		return "RD"
	}
	return fmt.Sprintf("TransportService(%d)", uint8(t))
}

// Timeout converts a 5-bit CM or ACK timeout exponent into a duration:
// 4.096 µs × 2^e (IBA 12.7.34 for the CM response timeouts, 9.7.6.1.3 for
// the local ACK timeout). Exponents above 31 are taken as 31.
func Timeout(e uint8) time.Duration {
	if e > 31 {
		e = 31
	}
	return time.Duration(4096<<e) * time.Nanosecond
}

// PrivateData lengths of the messages (IBA 12.6: Tables 106-116, 119-120).
const (
	REQPrivateDataLen     = 92
	MRAPrivateDataLen     = 222
	REJPrivateDataLen     = 148
	REJARILen             = 72
	REPPrivateDataLen     = 196
	RTUPrivateDataLen     = 224
	DREQPrivateDataLen    = 220
	DREPPrivateDataLen    = 224
	LAPPrivateDataLen     = 168
	APRPrivateDataLen     = 148
	APRInfoLen            = 72
	SIDRREQPrivateDataLen = 216
	SIDRREPPrivateDataLen = 136
	SIDRREPInfoLen        = 72
)

// Bit-field helpers. IBA tables number bits from the most significant bit
// of a byte; these take the shift of the field's lowest bit instead.

func getBits(b []byte, off int, shift, width uint) uint8 {
	return b[off] >> shift & (1<<width - 1)
}

func putBits(b []byte, off int, shift, width uint, v uint8) {
	mask := uint8(1<<width-1) << shift
	b[off] = b[off]&^mask | v<<shift&mask
}

func getBool(b []byte, off int, shift uint) bool { return b[off]>>shift&1 != 0 }

func putBool(b []byte, off int, shift uint, v bool) {
	var x uint8
	if v {
		x = 1
	}
	putBits(b, off, shift, 1, x)
}

// get24 reads the 24-bit field in the top three bytes of the word at off.
func get24(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) >> 8 }

// put24 writes a 24-bit field in the top three bytes of the word at off
// and leaves the fourth byte alone.
func put24(b []byte, off int, v uint32) {
	b[off], b[off+1], b[off+2] = byte(v>>16), byte(v>>8), byte(v)
}

func u16(b []byte, off int) uint16      { return binary.BigEndian.Uint16(b[off:]) }
func u32(b []byte, off int) uint32      { return binary.BigEndian.Uint32(b[off:]) }
func u64(b []byte, off int) uint64      { return binary.BigEndian.Uint64(b[off:]) }
func put16(b []byte, off int, v uint16) { binary.BigEndian.PutUint16(b[off:], v) }
func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.BigEndian.PutUint64(b[off:], v) }
func gid(b []byte, off int) (g GID)     { copy(g[:], b[off:off+16]); return }
func putGID(b []byte, off int, g GID)   { copy(b[off:off+16], g[:]) }

// putData copies private data into a field of n bytes, zero-filling.
func putData(b []byte, off, n int, d []byte) {
	c := copy(b[off:off+n], d)
	clear(b[off+c : off+n])
}
