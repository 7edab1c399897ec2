package qp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
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
			q := &QP{attr: Attr{DestAddr: tc.dest}}
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
			if got := c.QP.Counters.BadAddr; got != 4 {
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
