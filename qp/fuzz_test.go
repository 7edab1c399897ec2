package qp

import (
	"bytes"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// FuzzResponder feeds arbitrary packets to an RTS QP whose memory holds a
// writable region between guard bytes and a read-only region: the engine
// must never panic and never write anywhere but the writable region.
// fuzzKeys is the key cipher's key in FuzzResponder, fixed so that the
// seeds name the regions.
const fuzzKeys = 0x5eed_0f_4e5f0fd5

// rekey gives the table a fixed cipher key, for tests; only an empty table
// may be rekeyed.
func (t *MRTable) rekey(k uint64) { t.keys, t.keyed = newKeyCipher(k), true }

func FuzzResponder(f *testing.F) { fuzzResponder(f, 0) }

// FuzzResponderSelective runs the responder's fuzzer on a QP doing
// selective repeat (sr.go): packets ahead of the expected PSN are placed,
// and WRITE MIDDLE and LAST packets carry a placement header.
func FuzzResponderSelective(f *testing.F) { fuzzResponder(f, RetransSelective) }

func fuzzResponder(f *testing.F, retrans RetransFlags) {
	seed := func(op bth.Opcode, pf bth.PacketFields, payload []byte) {
		pf.BTH.Opcode, pf.BTH.PSN, pf.BTH.AckReq, pf.BTH.PKey = op, ctxRQPSN, true, 0xffff
		b := make([]byte, bth.PacketLen(op, len(payload)))
		if _, err := pf.Encode(b, payload); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// The keys the regions below get under fuzzKeys, so seeds reach
	// them: the writable region takes slot 1 again, the read-only slot 2.
	var keys MRTable
	keys.rekey(fuzzKeys)
	key := keys.keys.encrypt(1<<keyGenBits | 2)
	roKey := keys.keys.encrypt(2<<keyGenBits | 1)
	seed(bth.RCSendOnly, bth.PacketFields{}, []byte("hello"))
	seed(bth.RCSendFirst, bth.PacketFields{}, make([]byte, ctxMTU))
	seed(bth.RCWriteOnly, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: key, DMALen: 8}}, make([]byte, 8))
	seed(bth.RCWriteOnlyImm, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 4, RKey: key, DMALen: 3}, ImmDt: 9}, make([]byte, 3))
	seed(bth.RCReadRequest, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: key, DMALen: 3000}}, nil)
	seed(bth.RCFetchAdd, bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 8, RKey: key, SwapAdd: 1}}, nil)
	seed(bth.RCCompareSwap, bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 16, RKey: roKey}}, nil)
	seed(bth.RCReadRequest, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 0x10000, RKey: roKey, DMALen: 4096}}, nil)
	seed(bth.RCWriteOnly, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 0x10000, RKey: roKey, DMALen: 8}}, make([]byte, 8))
	flush := func(plt FlushType, sel FlushLevel, va uint64, rkey, n uint32) bth.PacketFields {
		pf := bth.PacketFields{RETH: bth.RETHFields{VA: va, RKey: rkey, DMALen: n}}
		pf.FETH.PlacementType, pf.FETH.Selectivity = uint8(plt), uint8(sel)
		return pf
	}
	seed(bth.RCFlush, flush(FlushGlobal, FlushRange, ctxMemBase, key, 4096), nil)
	seed(bth.RCFlush, flush(FlushGlobal, FlushMR, 0, key, 0), nil)
	seed(bth.RCFlush, flush(FlushGlobal|FlushPersistent, FlushRange, ctxMemBase+0x10000, roKey, 8), nil)
	seed(bth.RCAtomicWrite, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 24, RKey: key, DMALen: 8}}, make([]byte, 8))
	seed(bth.RCAtomicWrite, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 4092, RKey: key, DMALen: 8}}, make([]byte, 8))
	seed(bth.RCAtomicWrite, bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 0x10000, RKey: roKey, DMALen: 8}}, make([]byte, 8))
	// SEND with invalidate of a registered region's key: the receive
	// fails and the QP goes to ERR (class J); of no key, likewise.
	seed(bth.RCSendOnlyInvalidate, bth.PacketFields{IETH: key}, []byte("inv"))
	seed(bth.RCSendLastInvalidate, bth.PacketFields{IETH: 0x12345678}, make([]byte, 4))
	if retrans&RetransSelective != 0 {
		// A WRITE LAST with its placement header, in sequence and
		// ahead of it, Placeable or not.
		place := make([]byte, bth.SRPlaceLen+8)
		bth.SRPlace(place).Encode(&bth.SRPlaceFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: key, DMALen: ctxMTU + 8}, Offset: ctxMTU})
		for _, ahead := range []int{0, 2} {
			for _, placeable := range []bool{false, true} {
				pf := bth.PacketFields{BTH: bth.BTHFields{Placed: true, Placeable: placeable}}
				pf.BTH.Opcode, pf.BTH.PSN, pf.BTH.AckReq, pf.BTH.PKey = bth.RCWriteLast, bth.PSN(ctxRQPSN).Add(ahead), true, 0xffff
				b := make([]byte, bth.PacketLen(bth.RCWriteLast, len(place)))
				if _, err := pf.Encode(b, place); err != nil {
					f.Fatal(err)
				}
				f.Add(b)
			}
		}
		pf := bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 64, RKey: key, DMALen: 8}}
		pf.BTH = bth.BTHFields{Opcode: bth.RCWriteOnly, PSN: bth.PSN(ctxRQPSN).Add(3), Placeable: true, PKey: 0xffff}
		b := make([]byte, bth.PacketLen(bth.RCWriteOnly, 8))
		if _, err := pf.Encode(b, make([]byte, 8)); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		c := NewRetrans(t, retrans)
		c.Port.free = 512 // a link's buffers are finite; a 2 GiB READ must not run away
		// Replace the 64 KiB region: writable [4096, 8192) of a larger
		// array, read-only [12288, 16384), guards elsewhere.
		if err := c.E.MRs.Deregister(c.MR.LKey); err != nil {
			t.Fatal(err)
		}
		c.E.MRs.rekey(fuzzKeys)
		all := make([]byte, 16384)
		for i := range all {
			all[i] = byte(i*31 + 7)
		}
		before := bytes.Clone(all)
		mr, err := c.E.MRs.Register(1, all[4096:8192], ctxMemBase, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		ro, err := c.E.MRs.Register(1, all[12288:], ctxMemBase+0x10000, AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		if mr.RKey != key || ro.RKey != roKey {
			t.Fatalf("keys %#x and %#x, seeds use %#x and %#x", mr.RKey, ro.RKey, key, roKey)
		}
		c.QP.rq.head, c.QP.rq.tail = 0, 0
		c.PostRecv(1, SGE{Addr: ctxMemBase + 1024, Length: 512, LKey: mr.LKey})
		if len(pkt) >= bth.BTHLen {
			h := bth.BTH(pkt)
			h.SetDestQP(c.QP.QPN())
		}
		buf := make([]byte, link.Headroom+len(pkt))
		copy(buf[link.Headroom:], pkt)
		// From a stranger first: nothing may be accepted or answered
		// (rxe's check_addr), whatever the packet says.
		lp := &link.Packet{Buf: buf, Off: link.Headroom, Len: len(pkt), Remote: ctxSpoofer}
		c.E.Receive(c.Now, []*link.Packet{lp})
		c.E.Process(c.Now)
		if len(c.Port.sent) != 0 || c.E.Stats().RxPackets != 0 || !bytes.Equal(all, before) {
			t.Fatalf("a packet from a stranger was answered (%d packets) or accepted", len(c.Port.sent))
		}
		lp.Remote = ctxPeer
		for range 3 { // again, to reach the duplicate paths
			c.E.Receive(c.Now, []*link.Packet{lp})
			c.E.Process(c.Now)
		}
		if !bytes.Equal(all[:4096], before[:4096]) || !bytes.Equal(all[8192:], before[8192:]) {
			t.Fatal("wrote outside the writable region")
		}
		for _, sent := range c.Port.sent {
			var p bth.Packet
			if err := p.Decode(sent.RoCE()); err != nil {
				t.Fatalf("sent an undecodable packet: %v", err)
			}
		}
		c.Port.sent = nil
	})
}
