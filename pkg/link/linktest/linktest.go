package linktest

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// QPN is the destination QP number Fill writes.
const QPN = 0x11

// Fill writes an RC SEND ONLY packet with the given PSN and payload length
// into p, addressed to dst, and sets p.Len. The payload bytes are a
// function of the PSN so Check can tell packets apart and see damage.
func Fill(p *link.Packet, psn uint32, payload int, dst netip.Addr) error {
	f := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: QPN, PSN: bth.PSN(psn), AckReq: true}}
	need := bth.PacketLen(bth.RCSendOnly, payload)
	if p.Off+need > len(p.Buf) {
		return fmt.Errorf("linktest: %d-byte packet does not fit a %d-byte buffer", need, len(p.Buf)-p.Off)
	}
	b := p.Buf[p.Off : p.Off+need]
	hl := bth.RCSendOnly.HeaderLen()
	pl := b[hl : hl+payload]
	for i := range pl {
		pl[i] = byte(psn) + byte(i)
	}
	// The payload is already in place: Encode's copy is onto itself.
	n, err := f.Encode(b, pl)
	p.Len = n
	p.Remote = dst
	return err
}

// Check decodes p and checks its payload; it returns the PSN.
func Check(p *link.Packet) (uint32, error) {
	var d bth.Packet
	if err := d.Decode(p.RoCE()); err != nil {
		return 0, fmt.Errorf("linktest: decode: %w", err)
	}
	if d.Opcode() != bth.RCSendOnly || d.BTH().DestQP() != QPN {
		return 0, fmt.Errorf("linktest: unexpected packet %v QP %#x", d.Opcode(), d.BTH().DestQP())
	}
	psn := uint32(d.BTH().PSN())
	for i, c := range d.Payload() {
		if c != byte(psn)+byte(i) {
			return psn, fmt.Errorf("linktest: PSN %d: payload byte %d is %#x, want %#x", psn, i, c, byte(psn)+byte(i))
		}
	}
	return psn, nil
}

// ErrIncomplete is returned by Exchange when packets went missing.
var ErrIncomplete = errors.New("linktest: packets missing")

// Exchange sends n packets of the given payload size from a to b, to
// address dst, in batches of at most batch, and receives them on b,
// checking each: payload, PSN (no duplicates) and, when from is valid, the
// source address. Packets refused with link.ErrResolving are sent again.
// It gives up after idle (no packet for that long).
func Exchange(t testing.TB, a, b link.Link, dst, from netip.Addr, n, payload, batch int, idle time.Duration) error {
	t.Helper()
	pk := make([]*link.Packet, batch)
	rx := make([]*link.Packet, batch)
	seen := make(map[uint32]bool, n)
	sent, got := 0, 0
	next := uint32(0) // the next PSN never sent
	var redo []uint32 // PSNs dropped while the next hop was resolved
	psns := make([]uint32, batch)
	last := time.Now()
	for got < n {
		if sent < n {
			k := a.Alloc(pk[:min(batch, n-sent)])
			for i := range k {
				if len(redo) > 0 {
					psns[i], redo = redo[0], redo[1:]
				} else {
					psns[i] = next
					next++
				}
				if err := Fill(pk[i], psns[i], payload, dst); err != nil {
					a.Release(pk[:k])
					return err
				}
			}
			m, err := a.Send(pk[:k])
			if errors.Is(err, link.ErrResolving) {
				// The packets before the answer came are the ones
				// dropped (one destination, resolved at most once
				// during a Send): send them again, as a transport's
				// retransmission would.
				redo = append(redo, psns[:k-m]...)
			} else if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			sent += m
		}
		if err := b.Wait(10 * time.Millisecond); err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		m, err := b.Recv(rx)
		if err != nil {
			return fmt.Errorf("recv: %w", err)
		}
		for _, p := range rx[:m] {
			psn, err := Check(p)
			if err == nil && seen[psn] {
				err = fmt.Errorf("linktest: PSN %d twice", psn)
			}
			if err == nil && from.IsValid() && p.Remote.Unmap() != from.Unmap() {
				err = fmt.Errorf("linktest: PSN %d from %v, want %v", psn, p.Remote, from)
			}
			if err == nil && p.Unverified {
				err = fmt.Errorf("linktest: PSN %d unverified", psn)
			}
			if err != nil {
				b.Release(rx[:m])
				return err
			}
			seen[psn] = true
		}
		got += m
		b.Release(rx[:m])
		if m > 0 {
			last = time.Now()
		} else if time.Since(last) > idle {
			return fmt.Errorf("%w: sent %d, received %d of %d", ErrIncomplete, sent, got, n)
		}
	}
	return nil
}
