package qp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc/cnp"
	"github.com/uroce/uroce/pkg/link"
)

// The tests here play a peer that is not the QP's: one that spoofs a
// source, guesses keys or asks for more than it may.

func TestSameAddr(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		x, y netip.Addr
		want bool
	}{
		{a("10.0.0.2"), a("10.0.0.2"), true},
		{a("10.0.0.2"), a("::ffff:10.0.0.2"), true},
		{a("::ffff:10.0.0.2"), a("::ffff:10.0.0.2"), true},
		{a("10.0.0.2"), a("10.0.0.3"), false},
		{a("::ffff:10.0.0.2"), a("10.0.0.3"), false},
		{a("10.0.0.2"), a("::a00:2"), false}, // IPv4-compatible is another address
		{a("fe80::1%eth0"), a("fe80::1"), true},
		{a("fe80::1"), a("fe80::2"), false},
		{a("2001:db8::1"), a("2001:db8::1"), true},
		{a("127.0.0.1"), a("127.0.0.1"), true},
		{a("127.0.0.1"), a("::1"), false},
		{netip.Addr{}, a("0.0.0.0"), false},
	} {
		if got := sameAddr(tc.x, tc.y); got != tc.want {
			t.Errorf("sameAddr(%v, %v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
		if got := sameAddr(tc.y, tc.x); got != tc.want {
			t.Errorf("sameAddr(%v, %v) = %v, want %v", tc.y, tc.x, got, tc.want)
		}
	}
}

// TestFromPeer: rxe's check_addr over the forms addresses take: a GID
// given in IPv4-mapped form, links that report the destination or not, a
// port bound to one address or to none.
func TestFromPeer(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name          string
		port, dest    netip.Addr // the engine's address, the QP's path
		remote, local netip.Addr // the packet's source and destination
		want          bool
	}{
		{"peer", a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.2"), a("10.0.0.1"), true},
		{"mapped GID", a("10.0.0.1"), a("::ffff:10.0.0.2"), a("10.0.0.2"), a("10.0.0.1"), true},
		{"mapped source", a("::ffff:10.0.0.1"), a("10.0.0.2"), a("::ffff:10.0.0.2"), a("::ffff:10.0.0.1"), true},
		{"other source", a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.3"), a("10.0.0.1"), false},
		{"other destination", a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.2"), a("10.0.0.9"), false},
		{"no source", a("10.0.0.1"), a("10.0.0.2"), netip.Addr{}, a("10.0.0.1"), false},
		{"no path", a("10.0.0.1"), netip.Addr{}, a("10.0.0.2"), a("10.0.0.1"), false},
		{"link without destination", a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.2"), netip.Addr{}, true},
		{"engine without address", netip.Addr{}, a("10.0.0.2"), a("10.0.0.2"), a("10.0.0.9"), true},
		{"loopback, one address", a("127.0.0.1"), a("127.0.0.1"), a("127.0.0.1"), a("127.0.0.1"), true},
		{"loopback, other source", a("127.0.0.1"), a("127.0.0.1"), a("127.0.0.2"), a("127.0.0.1"), false},
		{"IPv6", a("2001:db8::1"), a("2001:db8::2"), a("2001:db8::2"), a("2001:db8::1"), true},
		{"IPv6 other source", a("2001:db8::1"), a("2001:db8::2"), a("2001:db8::3"), a("2001:db8::1"), false},
		{"IPv6 link-local zone", a("fe80::1%eth0"), a("fe80::2%eth0"), a("fe80::2"), a("fe80::1"), true},
		{"family", a("10.0.0.1"), a("10.0.0.2"), a("::ffff:10.0.0.3"), a("10.0.0.1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{Addr: tc.port}
			q := &QP{destAddr: tc.dest}
			lp := &link.Packet{Remote: tc.remote, Local: tc.local, SrcPort: 0xc123}
			if got := e.fromPeer(q, lp); got != tc.want {
				t.Errorf("fromPeer = %v, want %v", got, tc.want)
			}
		})
	}
}

var (
	ctxLocal   = netip.MustParseAddr("10.0.0.1")
	ctxSpoofer = netip.MustParseAddr("10.0.0.66")
)

// TestSpoofedSource: a request with the QP's number and the very PSN it
// expects, from any address but its peer's or to any but this port's, is
// accepted by nothing: no answer, no memory or completion, no PSN spent,
// counted as bad_addr. The peer's own request at that PSN then goes
// through, from whichever UDP source port.
func TestSpoofedSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   bth.Opcode
		f    func(c *Context) *bth.PacketFields
		pay  int
		resp bth.Opcode
	}{
		{"send", bth.RCSendOnly, func(*Context) *bth.PacketFields { return &bth.PacketFields{} }, 64, bth.RCAcknowledge},
		{"write", bth.RCWriteOnly, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 64}}
		}, 64, bth.RCAcknowledge},
		{"read", bth.RCReadRequest, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 64}}
		}, 0, bth.RCReadResponseOnly},
		{"atomic", bth.RCFetchAdd, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 64, RKey: c.MR.RKey, SwapAdd: 1}}
		}, 0, bth.RCAtomicAcknowledge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			c.E.Addr = ctxLocal
			payload := bytes.Repeat([]byte{0xee}, tc.pay)
			before := bytes.Clone(c.Mem)
			for _, from := range []struct{ src, dst netip.Addr }{
				{ctxSpoofer, ctxLocal},
				{netip.MustParseAddr("::ffff:10.0.0.66"), ctxLocal},
				{netip.MustParseAddr("2001:db8::2"), ctxLocal},
				{ctxPeer, netip.MustParseAddr("10.0.0.77")}, // for another host
			} {
				c.Src, c.Dst = from.src, from.dst
				psn := c.PeerPSN
				c.SendRequest(tc.op, tc.f(c), payload, true)
				c.PeerPSN = psn
				c.CheckNoPacket()
			}
			if got := c.QP.Counters().BadAddr; got != 4 {
				t.Errorf("bad_addr %d, want 4", got)
			}
			if s := c.E.Stats(); s.BadAddr != 4 || s.RxPackets != 0 {
				t.Errorf("engine bad_addr %d, rcvd_pkts %d; want 4 and 0", s.BadAddr, s.RxPackets)
			}
			if !bytes.Equal(before, c.Mem) {
				t.Fatal("a spoofed request changed memory")
			}
			if n := c.RCQ.Poll(make([]Completion, 4)); n != 0 || c.QP.State() != StateRTS {
				t.Fatalf("%d completions, state %v", n, c.QP.State())
			}
			// The peer, in the IPv4-mapped form of its GID, from a
			// port of its own choosing.
			c.Src, c.Dst = netip.MustParseAddr("::ffff:10.0.0.2"), ctxLocal
			c.SendRequest(tc.op, tc.f(c), payload, true)
			c.Expect(opcodeIs(tc.resp), aethIs(ack, 1))
			if tc.op == bth.RCFetchAdd && binary.NativeEndian.Uint64(c.Mem[64:]) != 1 {
				t.Error("the peer's atomic did not execute once")
			}
			if tc.op == bth.RCWriteOnly && !bytes.Equal(c.Mem[:64], payload) {
				t.Error("the peer's write did not land")
			}
		})
	}
}

// reconnect takes c's QP through RESET back to RTS, as a peer reconnects
// after an error, with the PSNs New starts at.
func reconnect(c *Context) {
	c.t.Helper()
	c.modify(&Attr{State: StateReset}, AttrState)
	c.modify(&Attr{State: StateInit, AccessFlags: accessAll}, AttrState|AttrAccessFlags|AttrPKeyIndex|AttrPort)
	c.modify(&Attr{State: StateRTR, DestAddr: ctxPeer, PathMTU: ctxMTU, DestQPN: c.PeerQPN, RQPSN: ctxRQPSN, MaxDestRdAtomic: 4, MinRNRTimer: 12},
		AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer)
	c.modify(&Attr{State: StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: ctxSQPSN, MaxRdAtomic: 4},
		AttrState|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrSQPSN|AttrMaxQPRdAtomic)
	c.PeerPSN = ctxRQPSN
}

// TestGuessedRKeys plays a connected peer that has one region's key and
// guesses others: sequential keys, rxe's and the old index<<8 | generation
// layout, random ones, and keys near or derived from the one it has. Every
// guess is NAKed as a remote access error (class C, IBA 9.9.3.1.2: the QP
// goes to ERR and the peer must reconnect to guess again), and no byte of
// any region changes.
func TestGuessedRKeys(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	c.E.Addr = ctxLocal
	// Sixteen more regions, each 4 KiB at its own address.
	regions := []*MR{c.MR}
	for i := range 16 {
		m, err := c.E.MRs.Register(1, make([]byte, 4096), 0x100000+uint64(i)<<16, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		regions = append(regions, m)
	}
	live := map[uint32]bool{}
	var before [][]byte
	for _, m := range regions {
		live[m.RKey] = true
		before = append(before, bytes.Clone(m.Buf))
	}
	// The peer was given the first region's key (and the second's, to
	// extrapolate from).
	known, known2 := regions[0].RKey, regions[1].RKey
	var guesses []uint32
	for k := range uint32(128) {
		guesses = append(guesses, k)
	}
	r := rand.New(rand.NewPCG(16, 16))
	for idx := range uint32(17) {
		for gen := range uint32(4) {
			guesses = append(guesses, idx<<8|gen, idx<<8|uint32(r.IntN(256)), idx<<keyGenBits|gen)
		}
	}
	for range 128 {
		guesses = append(guesses, r.Uint32())
	}
	for b := range 32 {
		guesses = append(guesses, known^1<<b)
	}
	guesses = append(guesses, known+1, known-1, known2+(known2-known), known2^(known2^known)<<1, ^known, known>>8<<8|(known+1)&0xff)
	tried := 0
	for i, g := range guesses {
		if live[g] {
			continue // a live key is no guess: it is the access it grants
		}
		tried++
		m := regions[i%len(regions)]
		switch i % 3 {
		case 0:
			c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: bth.RETHFields{VA: m.Addr, RKey: g, DMALen: 8}}, bytes.Repeat([]byte{0xff}, 8), true)
		case 1:
			c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: m.Addr, RKey: g, DMALen: 64}}, nil, true)
		default:
			c.SendRequest(bth.RCFetchAdd, &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: m.Addr, RKey: g, SwapAdd: 1}}, nil, true)
		}
		c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(bth.NAK(bth.NAKRemoteAccessError), 0))
		if c.QP.State() != StateErr {
			t.Fatalf("guess %#x: state %v, want ERR", g, c.QP.State())
		}
		reconnect(c)
	}
	if tried < 256 {
		t.Fatalf("only %d guesses", tried)
	}
	for i, m := range regions {
		if !bytes.Equal(m.Buf, before[i]) {
			t.Fatalf("region %d (key %#x) changed", i, m.RKey)
		}
	}
	if s := c.E.Stats(); s.RemAccessErrs != uint64(tried) {
		t.Errorf("resp_remote_access_errors %d, want %d", s.RemAccessErrs, tried)
	}
	// The key it has works: the requests above failed for their keys.
	c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: bth.RETHFields{VA: regions[1].Addr, RKey: known2, DMALen: 8}}, bytes.Repeat([]byte{0xff}, 8), true)
	c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(ack, 1))
	if regions[1].Buf[0] != 0xff {
		t.Error("a write with the known key did not land")
	}
}

// TestReadPastRegion: a READ that reaches past its region by a byte or by
// terabytes, wraps the address space or starts below the region is NAKed
// (class C, rxe's check_rkey) and sends no byte of memory; a length over
// 2^31 is an invalid request (C9-94).
func TestReadPastRegion(t *testing.T) {
	const size = 64 << 10 // New's region
	for _, tc := range []struct {
		name string
		va   uint64
		n    uint32
		code bth.NAKCode
	}{
		{"one byte past", ctxMemBase + size - 63, 64, bth.NAKRemoteAccessError},
		{"at the end", ctxMemBase + size, 1, bth.NAKRemoteAccessError},
		{"a page past", ctxMemBase + size + 4096, 64, bth.NAKRemoteAccessError},
		{"far past", ctxMemBase + 1<<40, 4096, bth.NAKRemoteAccessError},
		{"2 GiB from the start", ctxMemBase, 1 << 31, bth.NAKRemoteAccessError},
		{"wraps", 1<<64 - 16, 64, bth.NAKRemoteAccessError},
		{"below", ctxMemBase - 4096, 4097, bth.NAKRemoteAccessError},
		{"over 2^31", ctxMemBase, 1<<31 + 1, bth.NAKInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: tc.va, RKey: c.MR.RKey, DMALen: tc.n}}, nil, true)
			c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(bth.NAK(tc.code), 0), payloadLen(0))
			c.CheckNoPacket()
			if c.QP.State() != StateErr {
				t.Errorf("state %v, want ERR", c.QP.State())
			}
		})
	}
}

// drainSent runs the engine until it sends nothing more and returns how many
// packets it sent, discarding them.
func drainSent(c *Context) int {
	n := 0
	for {
		c.E.Process(c.Now)
		if len(c.Port.sent) == 0 {
			return n
		}
		n += len(c.Port.sent)
		c.Port.sent = nil
	}
}

// TestTooManyRdAtomic: max_dest_rd_atomic (4 here) bounds the READs and
// atomics a peer may have unanswered. A fifth while the first's response
// is still going out is NAKed as an invalid request (class C), counted,
// and no resource, response or byte of memory is spent on it.
func TestTooManyRdAtomic(t *testing.T) {
	for _, fifth := range []bth.Opcode{bth.RCReadRequest, bth.RCFetchAdd} {
		t.Run(fifth.String(), func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			big, err := c.E.MRs.Register(1, make([]byte, 1<<20), 0x1000000, accessAll)
			if err != nil {
				t.Fatal(err)
			}
			// The first READ's 1024 response packets take many
			// turns; the next three wait behind it.
			c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: big.Addr, RKey: big.RKey, DMALen: 1 << 20}}, nil, true)
			c.PeerPSN = c.PeerPSN.Add(1<<20/ctxMTU - 1)
			for range 3 {
				c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}, nil, true)
			}
			c.Port.sent = nil
			before := bytes.Clone(c.Mem)
			psn := c.PeerPSN
			if fifth == bth.RCFetchAdd {
				c.SendRequest(fifth, &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase, RKey: c.MR.RKey, SwapAdd: 1}}, nil, true)
			} else {
				c.SendRequest(fifth, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}, nil, true)
			}
			c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(psn), aethIs(bth.NAK(bth.NAKInvalidRequest), 4))
			c.CheckNoPacket()
			if c.QP.Counters().TooManyRdAtomic != 1 || c.QP.State() != StateErr {
				t.Errorf("too_many_rd_atomic %d, state %v", c.QP.Counters().TooManyRdAtomic, c.QP.State())
			}
			if !bytes.Equal(before, c.Mem) {
				t.Error("the refused request changed memory")
			}
		})
	}
}

// TestRdAtomicWithinLimit: a peer that waits for its answers reuses the
// resources forever, and a resource held only by the replay of a response
// sent before is free for the next request (the peer that sends it has
// that response): the replay stops, nothing is NAKed.
func TestRdAtomicWithinLimit(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	for i := range 100 {
		if i%2 == 0 {
			c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}, nil, true)
			c.Expect(opcodeIs(bth.RCReadResponseOnly))
		} else {
			c.SendRequest(bth.RCFetchAdd, &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 8, RKey: c.MR.RKey, SwapAdd: 1}}, nil, true)
			c.Expect(opcodeIs(bth.RCAtomicAcknowledge))
		}
	}
	big, err := c.E.MRs.Register(1, make([]byte, 1<<20), 0x1000000, accessAll)
	if err != nil {
		t.Fatal(err)
	}
	// The oldest resource is next to be recycled: READ A takes it and
	// is answered in full.
	for c.QP.resp.resNext != 0 {
		c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}, nil, true)
		c.Expect(opcodeIs(bth.RCReadResponseOnly))
	}
	reqA := &bth.PacketFields{RETH: bth.RETHFields{VA: big.Addr, RKey: big.RKey, DMALen: 1 << 20}}
	a := c.PeerPSN
	c.SendRequest(bth.RCReadRequest, reqA, nil, true)
	c.PeerPSN = a.Add(1 << 20 / ctxMTU)
	if n := drainSent(c); n != 1<<20/ctxMTU {
		t.Fatalf("READ A: %d response packets", n)
	}
	// Its duplicate: the replay is in progress when B, C and D queue
	// behind it, and E needs A's resource.
	next := c.PeerPSN
	c.PeerPSN = a
	c.SendRequest(bth.RCReadRequest, reqA, nil, true)
	c.PeerPSN = next
	for range 4 {
		c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}, nil, true)
	}
	drainSent(c)
	if c.QP.Counters().TooManyRdAtomic != 0 || c.QP.State() != StateRTS {
		t.Fatalf("too_many_rd_atomic %d, state %v", c.QP.Counters().TooManyRdAtomic, c.QP.State())
	}
	for i := range c.QP.resp.res {
		if c.QP.resp.res[i].owed {
			t.Errorf("resource %d still owed", i)
		}
	}
	if c.QP.Counters().ErrNAKsSent != 0 {
		t.Errorf("%d error NAKs", c.QP.Counters().ErrNAKsSent)
	}
}

// TestSpoofedCNP: a CNP naming a connected QP slows it only when it comes
// from the QP's peer; a stranger's is dropped and counted, so it cannot
// throttle the QP.
func TestSpoofedCNP(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	c.E.Addr = ctxLocal
	buf := make([]byte, link.Headroom+cnp.Len)
	n, err := cnp.Encode(buf[link.Headroom:], c.QP.QPN())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from      netip.Addr
		cnps, bad uint64
	}{
		{ctxSpoofer, 0, 1},
		{netip.MustParseAddr("::ffff:10.0.0.2"), 1, 1},
	} {
		c.E.Receive(c.Now, []*link.Packet{{Buf: buf, Off: link.Headroom, Len: n, Remote: tc.from, Local: ctxLocal, TOS: cnp.DSCP << 2}})
		if s := c.E.Stats(); s.CNPsRcvd != tc.cnps || s.BadAddr != tc.bad {
			t.Errorf("CNP from %v: cnps_rcvd %d, bad_addr %d; want %d and %d", tc.from, s.CNPsRcvd, s.BadAddr, tc.cnps, tc.bad)
		}
	}
}
