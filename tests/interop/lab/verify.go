package lab

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
)

// RoCEStats is what VerifyRoCE found in a capture.
type RoCEStats struct {
	Frames  int                // every frame
	Packets int                // RoCEv2 packets (UDP to port 4791), good or bad
	Opcodes map[bth.Opcode]int // good packets by BTH opcode
	// MaxPayload is the largest payload of a good packet: the IB MTU
	// in use when the run had messages that large.
	MaxPayload int
	Bad        int     // packets that did not decode or verify
	Errs       []error // the first few of those, with their frame numbers
	// Dump is uroce-dump's summary of the same frames; DumpErr says why
	// it was not clean (malformed packets, bad ICRCs, a count that
	// differs from package bth's, or uroce-dump failing to run).
	Dump    DumpSummary
	DumpErr error
}

// maxErrs is how many bad packets a RoCEStats describes.
const maxErrs = 10

// VerifyRoCE decodes every frame with package bth and checks the ICRC of
// every RoCEv2 packet. Other traffic (ARP, perftest's TCP exchange, IPv6
// neighbour discovery) is counted in Frames only. It then has uroce-dump
// decode the same frames (Dump) and requires it to find only well-formed
// packets with good ICRCs, as many as bth found.
func VerifyRoCE(recs []pcapfile.Record) RoCEStats {
	s := RoCEStats{Frames: len(recs), Opcodes: map[bth.Opcode]int{}}
	bad := func(i int, err error) {
		s.Bad++
		if len(s.Errs) < maxErrs {
			s.Errs = append(s.Errs, fmt.Errorf("frame %d: %w", i+1, err))
		}
	}
	for i, r := range recs {
		var f bth.Frame
		err := f.Decode(r.Data)
		if errors.Is(err, bth.ErrNotRoCE) {
			continue
		}
		s.Packets++
		switch {
		case len(r.Data) < r.OrigLen:
			bad(i, fmt.Errorf("captured %d of %d bytes", len(r.Data), r.OrigLen))
		case err != nil:
			bad(i, err)
		default:
			if err := f.VerifyICRC(); err != nil {
				bad(i, fmt.Errorf("%v PSN %d: %w", f.Opcode(), f.BTH().PSN(), err))
				continue
			}
			s.Opcodes[f.Opcode()]++
			s.MaxPayload = max(s.MaxPayload, len(f.Payload()))
		}
	}
	s.Dump, s.DumpErr = Dump(recs)
	if s.DumpErr == nil {
		s.DumpErr = s.Dump.check(s.Packets)
	}
	return s
}

// check requires a clean capture of n RoCEv2 packets.
func (d DumpSummary) check(n int) error {
	switch {
	case d.Malformed != 0 || d.ICRCBad != 0:
		return fmt.Errorf("uroce-dump: %d malformed packets, %d with a bad ICRC", d.Malformed, d.ICRCBad)
	case d.RoCE != n:
		return fmt.Errorf("uroce-dump decoded %d RoCEv2 packets, package bth %d", d.RoCE, n)
	}
	return nil
}

// Err is nil when every RoCEv2 packet was good, to package bth and to
// uroce-dump.
func (s RoCEStats) Err() error {
	if s.Bad == 0 {
		return s.DumpErr
	}
	return errors.Join(fmt.Errorf("%d of %d RoCEv2 packets bad: %w", s.Bad, s.Packets, errors.Join(s.Errs...)), s.DumpErr)
}

// String lists the opcodes seen, e.g. "RC_RDMA_WRITE_ONLY×20 RC_ACKNOWLEDGE×20".
func (s RoCEStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d frames, %d RoCEv2 packets (%d bad), payloads up to %d bytes:", s.Frames, s.Packets, s.Bad, s.MaxPayload)
	for _, op := range slices.Sorted(maps.Keys(s.Opcodes)) {
		fmt.Fprintf(&b, " %v×%d", op, s.Opcodes[op])
	}
	fmt.Fprintf(&b, "; uroce-dump: %d RoCE, %d malformed, %d ICRC bad", s.Dump.RoCE, s.Dump.Malformed, s.Dump.ICRCBad)
	return b.String()
}

// Tail describes the last n RoCEv2 packets of recs, one line each: the
// time since the first frame, the addresses, the opcode, the destination
// QP and the PSN, and an ACK's syndrome. A failure's log shows with it
// which side stopped answering.
func Tail(recs []pcapfile.Record, n int) string {
	var lines []string
	for i := len(recs) - 1; i >= 0 && len(lines) < n; i-- {
		var f bth.Frame
		if f.Decode(recs[i].Data) != nil {
			continue
		}
		var src, dst netip.Addr
		if f.IPVersion() == 4 {
			src, dst = f.IPv4().Src(), f.IPv4().Dst()
		} else {
			src, dst = f.IPv6().Src(), f.IPv6().Dst()
		}
		l := fmt.Sprintf("%10.6f %v → %v %v qp=%#x psn=%d", recs[i].Time.Sub(recs[0].Time).Seconds(),
			src, dst, f.Opcode(), f.BTH().DestQP(), f.BTH().PSN())
		if f.Opcode() == bth.RCAcknowledge {
			l += fmt.Sprintf(" %v", f.AETH().Syndrome())
		}
		lines = append(lines, l)
	}
	slices.Reverse(lines)
	return strings.Join(lines, "\n")
}
