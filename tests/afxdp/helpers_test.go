package afxdp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

const qpn = 0x11

// open opens an afxdp link on v inside v's namespace; t.Cleanup closes it.
func open(t *testing.T, v netns.Veth, cfg afxdp.Config) *afxdp.Link {
	t.Helper()
	cfg.Interface = v.Name
	var l *afxdp.Link
	err := v.NS.Do(func() (err error) {
		l, err = afxdp.Open(cfg)
		return err
	})
	if err != nil {
		t.Fatalf("open afxdp on %s: %v", v.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fill writes an RC SEND ONLY packet whose payload derives from psn.
func fill(t testing.TB, p *link.Packet, psn uint32, payload int, dst netip.Addr) {
	t.Helper()
	f := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: qpn, PSN: bth.PSN(psn)}}
	need := bth.PacketLen(bth.RCSendOnly, payload)
	if p.Off+need > len(p.Buf) {
		t.Fatalf("%d-byte packet does not fit a %d-byte buffer", need, len(p.Buf)-p.Off)
	}
	pl := make([]byte, payload)
	for i := range pl {
		pl[i] = byte(psn) + byte(i)
	}
	n, err := f.Encode(p.Buf[p.Off:p.Off+need], pl)
	if err != nil {
		t.Fatal(err)
	}
	p.Len = n
	p.Remote = dst
}

// check decodes a received RoCE packet and returns its PSN.
func check(b []byte) (uint32, error) {
	var d bth.Packet
	if err := d.Decode(b); err != nil {
		return 0, fmt.Errorf("decode: %w", err)
	}
	if d.Opcode() != bth.RCSendOnly || d.BTH().DestQP() != qpn {
		return 0, fmt.Errorf("unexpected packet %v QP %#x", d.Opcode(), d.BTH().DestQP())
	}
	psn := uint32(d.BTH().PSN())
	want := make([]byte, len(d.Payload()))
	for i := range want {
		want[i] = byte(psn) + byte(i)
	}
	if !bytes.Equal(d.Payload(), want) {
		return psn, fmt.Errorf("PSN %d: payload damaged", psn)
	}
	return psn, nil
}

// giveUp bounds how long a test waits for a packet that should come, so a
// broken path fails instead of hanging. It is not a performance limit.
const giveUp = 10 * time.Second

// exchange sends one packet of each payload size from a to b and checks
// every one arrives intact, with its ICRC verified by b, from the right
// source address.
func exchange(t *testing.T, a, b link.Link, dst netip.Addr, sizes []int) {
	t.Helper()
	pk := make([]*link.Packet, 1)
	before := b.Stats()
	for i, size := range sizes {
		for {
			if a.Alloc(pk) != 1 {
				t.Fatalf("alloc failed")
			}
			fill(t, pk[0], uint32(i), size, dst)
			pk[0].SrcPort = 0xc123
			n, err := a.Send(pk)
			if errors.Is(err, link.ErrResolving) {
				// Dropped while the next hop is learnt: send again,
				// as the transport would.
				time.Sleep(time.Millisecond)
				continue
			}
			if n != 1 || err != nil {
				t.Fatalf("send %d-byte payload: %d, %v", size, n, err)
			}
			break
		}
		await(t, b, uint32(i), func(p *link.Packet, _ uint32, err error) {
			if err != nil {
				t.Errorf("payload %d: %v", size, err)
			}
			if want := a.Info().Addr; p.Remote != want {
				t.Errorf("remote %v, want %v", p.Remote, want)
			}
		})
	}
	after := b.Stats()
	if d := after.RxICRCErrors - before.RxICRCErrors; d != 0 {
		t.Errorf("%d ICRC errors on the receiver", d)
	}
}

// await receives on b until the packet of PSN psn has come, handing every
// packet to fn with check's verdict before releasing it; it fails the
// test if that takes giveUp.
func await(t *testing.T, b link.Link, psn uint32, fn func(p *link.Packet, psn uint32, err error)) {
	t.Helper()
	rx := make([]*link.Packet, 8)
	deadline := time.Now().Add(giveUp)
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatalf("PSN %d never arrived; receiver stats %+v", psn, b.Stats())
		}
		if err := b.Wait(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n, err := b.Recv(rx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rx[:n] {
			q, err := check(p.RoCE())
			fn(p, q, err)
			got = got || q == psn
		}
		b.Release(rx[:n])
	}
}
