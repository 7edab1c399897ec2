package perftest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Version is the perftest protocol version uroce announces (see the
// package documentation for why it is not the newest).
const Version = "6.06"

// DefaultPort is perftest's TCP port.
const DefaultPort = 18515

const (
	versionLen = 16
	destLen    = 108
)

// Errors returned by the exchange.
var (
	// ErrProtocol means the peer sent a message that does not parse.
	ErrProtocol = errors.New("perftest protocol error")
	// ErrIncompatible means the peer's version or parameters cannot work
	// with ours.
	ErrIncompatible = errors.New("incompatible perftest peer")
)

// Conn runs perftest's exchange over a stream. Client says which side
// writes first in each step.
type Conn struct {
	rw     io.ReadWriter
	client bool
	// binary: the rdma_cm exchange (NewCMConn).
	binary bool
	// RemoteVersion is the version the peer announced, once Hello ran.
	RemoteVersion string
	remote        float64
}

// NewConn returns a Conn on rw; client is true on the side that dialled.
func NewConn(rw io.ReadWriter, client bool) *Conn { return &Conn{rw: rw, client: client} }

// Exchange sends mine and reads len(theirs) bytes, in perftest's order:
// the client writes first, the server reads first.
func (c *Conn) Exchange(mine, theirs []byte) error {
	if c.client {
		if _, err := c.rw.Write(mine); err != nil {
			return fmt.Errorf("perftest: write: %w", err)
		}
		if _, err := io.ReadFull(c.rw, theirs); err != nil {
			return fmt.Errorf("perftest: read %d bytes: %w", len(theirs), err)
		}
		return nil
	}
	if _, err := io.ReadFull(c.rw, theirs); err != nil {
		return fmt.Errorf("perftest: read %d bytes: %w", len(theirs), err)
	}
	if _, err := c.rw.Write(mine); err != nil {
		return fmt.Errorf("perftest: write: %w", err)
	}
	return nil
}

// MTU is the IB MTU enum perftest exchanges (ibv_mtu: 1 = 256 ... 5 = 4096).
type MTU int

// Bytes returns the MTU in bytes, or 0 for an invalid enum.
func (m MTU) Bytes() int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the enum of an MTU in bytes, or 0 if it is not one.
func MTUFromBytes(n int) MTU {
	for m := MTU(1); m <= 5; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// SysData is what the first steps of the exchange settle.
type SysData struct {
	PageSize, CacheLine int
	MTU                 MTU
}

// Hello runs the version, system data and MTU steps (perftest's
// exchange_versions, check_sys_data and check_mtu) and returns the values
// both sides then use: the larger page and cache line sizes and the
// smaller MTU.
func (c *Conn) Hello(mine SysData) (SysData, error) {
	var v, rv [versionLen]byte
	copy(v[:], Version)
	if err := c.Exchange(v[:], rv[:]); err != nil {
		return SysData{}, fmt.Errorf("version: %w", err)
	}
	c.RemoteVersion = strings.TrimRight(string(rv[:]), "\x00")
	c.remote = atof(c.RemoteVersion)
	// perftest refuses peers older than 5.70 (check_version_compatibility).
	if c.remote < 5.70 {
		return SysData{}, fmt.Errorf("perftest: %w: peer version %q", ErrIncompatible, c.RemoteVersion)
	}
	out := mine
	var m, r [4]byte
	binary.BigEndian.PutUint32(m[:], uint32(mine.PageSize))
	if err := c.Exchange(m[:], r[:]); err != nil {
		return SysData{}, fmt.Errorf("page size: %w", err)
	}
	out.PageSize = max(out.PageSize, int(int32(binary.BigEndian.Uint32(r[:]))))
	binary.BigEndian.PutUint32(m[:], uint32(mine.CacheLine))
	if err := c.Exchange(m[:], r[:]); err != nil {
		return SysData{}, fmt.Errorf("cache line: %w", err)
	}
	out.CacheLine = max(out.CacheLine, int(int32(binary.BigEndian.Uint32(r[:]))))
	// The MTU goes as decimal text in 2 bytes (sizeof(char[2]) from 5.31:
	// "3" and its NUL).
	var mm, rm [2]byte
	copy(mm[:], strconv.Itoa(int(mine.MTU)))
	if err := c.Exchange(mm[:], rm[:]); err != nil {
		return SysData{}, fmt.Errorf("mtu: %w", err)
	}
	if rem := MTU(atoi(strings.TrimRight(string(rm[:]), "\x00"))); rem.Bytes() != 0 && rem < mine.MTU {
		out.MTU = rem
	}
	return out, nil
}

// HandShake exchanges Dest messages (perftest's ctx_hand_shake). The tests
// call it both to swap QP details and as a barrier.
func (c *Conn) HandShake(mine Dest) (Dest, error) {
	if c.binary {
		var m, r [DestBinaryLen]byte
		mine.PutBinary(m[:])
		if err := c.Exchange(m[:], r[:]); err != nil {
			return Dest{}, fmt.Errorf("handshake: %w", err)
		}
		return ParseDestBinary(r[:])
	}
	var m, r [destLen]byte
	mine.put(m[:])
	if err := c.Exchange(m[:], r[:]); err != nil {
		return Dest{}, fmt.Errorf("handshake: %w", err)
	}
	return ParseDest(r[:])
}

// BWReport is the bandwidth report the two sides of a bw test swap.
type BWReport struct {
	Size, Iters            uint64
	BWPeak, BWAvg, MsgRate float64
}

// ExchangeBWReports swaps bandwidth reports (perftest's xchg_bw_reports,
// without the per-port fields): size, iterations (8 bytes from 5.33),
// peak, average and message rate, each big-endian.
func (c *Conn) ExchangeBWReports(mine BWReport) (BWReport, error) {
	var out BWReport
	var m, r [8]byte
	step := func(v uint64, n int) (uint64, error) {
		binary.BigEndian.PutUint64(m[:], v)
		if n == 4 {
			binary.BigEndian.PutUint32(m[:], uint32(v))
		}
		if err := c.Exchange(m[:n], r[:n]); err != nil {
			return 0, fmt.Errorf("bw report: %w", err)
		}
		if n == 4 {
			return uint64(binary.BigEndian.Uint32(r[:])), nil
		}
		return binary.BigEndian.Uint64(r[:]), nil
	}
	var err error
	if out.Size, err = step(mine.Size, 8); err != nil {
		return out, err
	}
	itersLen := 8
	if c.remote < 5.33 {
		itersLen = 4
	}
	if out.Iters, err = step(mine.Iters, itersLen); err != nil {
		return out, err
	}
	for _, f := range []struct {
		mine float64
		to   *float64
	}{{mine.BWPeak, &out.BWPeak}, {mine.BWAvg, &out.BWAvg}, {mine.MsgRate, &out.MsgRate}} {
		v, err := step(math.Float64bits(f.mine), 8)
		if err != nil {
			return out, err
		}
		*f.to = math.Float64frombits(v)
	}
	return out, nil
}

// Close ends the exchange as perftest 4.5 does: a last handshake as a
// barrier, then "done" with its NUL. Newer perftest closes without "done";
// Close sends it either way, and neither waits for the peer's.
func (c *Conn) Close(mine Dest) error {
	if _, err := c.HandShake(mine); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if c.binary {
		return nil // ctx_close_connection writes "done" only over TCP
	}
	if _, err := c.rw.Write([]byte("done\x00")); err != nil {
		return fmt.Errorf("perftest: close: %w", err)
	}
	return nil
}

// atof reads the leading decimal number of a version string as C's atof
// does ("6.06" → 6.06; garbage → 0).
func atof(s string) float64 {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0
	}
	return f
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
