package rc_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/verbs"
)

// TestHostilePeer plays an attacker against a connection between two
// namespaces: from another address on the peer's own host it sends the
// requests the peer would (right QPN, right PSN, right key), and as the
// connected peer itself it guesses keys and reads past the region. None
// of it lands; the connection's own traffic goes on.
func TestHostilePeer(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, netns.PairConfig{
		A: []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24")},
	})
	spoofer := netip.MustParseAddr("10.99.0.66")
	p.B.AddAddr(t, netip.PrefixFrom(spoofer, 24))
	a, b := open(t, p.A.NS, p.AddrA), open(t, p.B.NS, p.AddrB)
	// A answers on its own goroutine; B is driven by its Waits.
	a.d.Start()
	connect := func(psnA, psnB uint32) {
		t.Helper()
		if err := b.q.Connect(a.q.Endpoint(psnA), verbs.ConnectOptions{PSN: psnB}); err != nil {
			t.Fatal(err)
		}
		if err := a.q.Connect(b.q.Endpoint(psnB), verbs.ConnectOptions{PSN: psnA}); err != nil {
			t.Fatal(err)
		}
	}
	const psnB = 500
	connect(9000, psnB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fill(a.mr.Buf(), 1)
	before := a.snapshot()

	t.Run("spoofed source", func(t *testing.T) {
		// Everything B's next WRITE and SEND would carry, from another
		// address of B's host: QPN, the expected PSN, a valid R_Key.
		f := newForger(t, p.B.NS, spoofer, p.AddrA)
		forged := func(pf *bth.PacketFields) *bth.PacketFields {
			pf.BTH.DestQP, pf.BTH.PSN, pf.BTH.PKey, pf.BTH.AckReq = a.q.QPN(), psnB, 0xffff, true
			return pf
		}
		type pkt struct {
			f       *bth.PacketFields
			payload []byte
		}
		pkts := []pkt{
			{forged(&bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCWriteOnly}, RETH: bth.RETHFields{VA: a.mr.Addr(), RKey: a.mr.RKey(), DMALen: 64}}), bytes.Repeat([]byte{0xee}, 64)},
			{forged(&bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCFetchAdd}, AtomicETH: bth.AtomicETHFields{VA: a.mr.Addr() + 64, RKey: a.mr.RKey(), SwapAdd: 1}}), nil},
			{forged(&bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCReadRequest}, RETH: bth.RETHFields{VA: a.mr.Addr(), RKey: a.mr.RKey(), DMALen: 64}}), nil},
		}
		rx0 := a.d.LinkStats().RxPackets
		for range 10 {
			for _, k := range pkts {
				f.send(t, k.f, k.payload)
			}
		}
		sent := uint64(10 * len(pkts))
		deadline := time.Now().Add(5 * time.Second)
		for a.d.Counters().BadAddr < sent && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		ca := a.d.Counters()
		if ca.BadAddr != sent || a.d.LinkStats().RxPackets-rx0 != sent {
			t.Fatalf("bad_addr %d, link received %d; sent %d", ca.BadAddr, a.d.LinkStats().RxPackets-rx0, sent)
		}
		if ca.RxPackets != 0 || ca.TxPackets != 0 {
			t.Errorf("A accepted %d packets, sent %d", ca.RxPackets, ca.TxPackets)
		}
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatal("a spoofed request changed memory")
		}
		// B's own WRITE at that same PSN lands.
		fill(b.mr.Buf()[:64], 2)
		wr := verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, 64), RemoteAddr: a.mr.Addr() + 4096, RKey: a.mr.RKey()}
		if err := b.q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		b.next(ctx, t, "the peer's WRITE")
		if !bytes.Equal(a.snapshot()[4096:4096+64], b.mr.Buf()[:64]) {
			t.Fatal("the peer's WRITE did not land")
		}
		copy(before[4096:], b.mr.Buf()[:64])
	})

	t.Run("guessed keys and reads past the region", func(t *testing.T) {
		// B has A's key; it guesses others: sequential, the old
		// index<<8 | generation layout, rxe's random low byte, random,
		// and A's key with a bit flipped. Each fails with a remote
		// access error and ends the connection, so B reconnects.
		r := rand.New(rand.NewPCG(4791, 16))
		var guesses []uint32
		for k := range uint32(64) {
			guesses = append(guesses, k)
		}
		for idx := range uint32(16) {
			guesses = append(guesses, idx<<8|1, idx<<8|2, idx<<8|uint32(r.IntN(256)))
		}
		for range 112 {
			guesses = append(guesses, r.Uint32())
		}
		for bit := range 32 {
			guesses = append(guesses, a.mr.RKey()^1<<bit)
		}
		type try struct {
			op   verbs.WROpcode
			va   uint64
			rkey uint32
		}
		var tries []try
		for i, g := range guesses {
			if g == a.mr.RKey() {
				continue
			}
			op := []verbs.WROpcode{verbs.WRWrite, verbs.WRRead, verbs.WRFetchAdd}[i%3]
			tries = append(tries, try{op, a.mr.Addr(), g})
		}
		end := a.mr.Addr() + uint64(len(a.mr.Buf()))
		for _, va := range []uint64{end - 8, end, end + 4096, end + 1<<30, a.mr.Addr() - 64} {
			tries = append(tries, try{verbs.WRRead, va, a.mr.RKey()})
		}
		if len(tries) < 256 {
			t.Fatalf("%d tries", len(tries))
		}
		for i, tr := range tries {
			wr := verbs.SendWR{ID: uint64(100 + i), Opcode: tr.op, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 8192, 64), RemoteAddr: tr.va, RKey: tr.rkey}
			if tr.op == verbs.WRFetchAdd {
				wr.SGL, wr.CompareAdd = sgl(b.mr, 8192, 8), 1
			}
			if err := b.q.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			var wc [1]verbs.WC
			if _, err := b.cq.Wait(ctx, wc[:]); err != nil {
				t.Fatal(err)
			}
			if wc[0].Status != verbs.WCRemAccessErr {
				t.Fatalf("try %d (%v at %#x, key %#x): %v, want a remote access error", i, tr.op, tr.va, tr.rkey, wc[0].Status)
			}
			for _, q := range []*verbs.QueuePair{a.q, b.q} {
				if err := q.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
					t.Fatal(err)
				}
			}
			connect(verbs.RandomPSN(), verbs.RandomPSN())
		}
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatal("a guessed key changed memory")
		}
		if c := a.d.Counters(); c.RemAccessErrs != uint64(len(tries)) {
			t.Errorf("resp_remote_access_errors %d, want %d", c.RemAccessErrs, len(tries))
		}
		// The connection still works with the key B was given.
		fill(b.mr.Buf()[:64], 3)
		wr := verbs.SendWR{ID: 2, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, 64), RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}
		if err := b.q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		b.next(ctx, t, "the WRITE with the given key")
	})
}
