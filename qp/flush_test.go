package qp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/netem"
)

// flushFields returns a FLUSH's FETH and RETH.
func flushFields(plt FlushType, sel FlushLevel, va uint64, rkey, n uint32) *bth.PacketFields {
	f := &bth.PacketFields{RETH: bth.RETHFields{VA: va, RKey: rkey, DMALen: n}}
	f.FETH.PlacementType, f.FETH.Selectivity = uint8(plt), uint8(sel)
	return f
}

func awFields(va uint64, rkey uint32) *bth.PacketFields {
	return &bth.PacketFields{RETH: bth.RETHFields{VA: va, RKey: rkey, DMALen: 8}}
}

// TestResponderFlushAtomicWrite checks what rxe's responder answers: a
// zero-length READ Response Only with the request's PSN and MSN, the ATOMIC
// WRITE's 8 bytes in memory as the wire carries them, and duplicates
// answered again without executing again.
func TestResponderFlushAtomicWrite(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	val := []byte{1, 2, 3, 4, 5, 6, 7, 8}

	psn := c.PeerPSN
	c.SendRequest(bth.RCFlush, flushFields(FlushGlobal, FlushRange, ctxMemBase+64, c.MR.RKey, 4096), nil, true)
	c.Expect(opcodeIs(bth.RCReadResponseOnly), psnIs(psn), aethIs(ack, 1), payloadLen(0))

	// A whole-region FLUSH skips the range check (rxe: its VA and length
	// need not say anything).
	c.SendRequest(bth.RCFlush, flushFields(FlushGlobal, FlushMR, 0, c.MR.RKey, 0), nil, true)
	c.Expect(opcodeIs(bth.RCReadResponseOnly), aethIs(ack, 2), payloadLen(0))

	apsn := c.PeerPSN
	c.SendRequest(bth.RCAtomicWrite, awFields(ctxMemBase+128, c.MR.RKey), val, true)
	c.Expect(opcodeIs(bth.RCReadResponseOnly), psnIs(apsn), aethIs(ack, 3), payloadLen(0))
	if !bytes.Equal(c.Mem[128:136], val) || c.Mem[127] != 0 || c.Mem[136] != 0 {
		t.Fatalf("atomic write landed as % x", c.Mem[120:144])
	}

	// The duplicate is answered from the resource, with its own MSN, and
	// the memory the application changed since stays as it is.
	c.Mem[128] = 0xee
	next := c.PeerPSN
	c.PeerPSN = apsn
	c.SendRequest(bth.RCAtomicWrite, awFields(ctxMemBase+128, c.MR.RKey), []byte{9, 9, 9, 9, 9, 9, 9, 9}, true)
	c.Expect(opcodeIs(bth.RCReadResponseOnly), psnIs(apsn), aethIs(ack, 3), payloadLen(0))
	if c.Mem[128] != 0xee || c.Mem[129] != 2 {
		t.Fatalf("duplicate ATOMIC WRITE executed again: % x", c.Mem[128:136])
	}
	// A duplicate FLUSH likewise.
	c.PeerPSN = psn
	c.SendRequest(bth.RCFlush, flushFields(FlushGlobal, FlushRange, ctxMemBase+64, c.MR.RKey, 4096), nil, true)
	c.Expect(opcodeIs(bth.RCReadResponseOnly), psnIs(psn), aethIs(ack, 1), payloadLen(0))
	c.PeerPSN = next

	// A WRITE after them is ACKed as usual: the PSNs moved on by one each.
	c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 4}}, val[:4], true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(next), aethIs(ack, 4))
	if n := c.RCQ.Poll(make([]Completion, 4)); n != 0 {
		t.Errorf("%d receive completions for FLUSH/ATOMIC WRITE", n)
	}
	if c.QP.Counters().DupRequests != 2 {
		t.Errorf("%d duplicates counted, want 2", c.QP.Counters().DupRequests)
	}
}

func TestResponderFlushAtomicWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qp, mr Access // access flags; 0 keeps accessAll
		op     bth.Opcode
		f      func(c *Context) *bth.PacketFields
		pay    int
		code   bth.NAKCode
	}{
		{"flush bad rkey", 0, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal, FlushRange, ctxMemBase, c.MR.RKey+1, 8)
		}, 0, bth.NAKRemoteAccessError},
		{"flush whole region bad rkey", 0, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal, FlushMR, ctxMemBase, c.MR.RKey^0x100, 0)
		}, 0, bth.NAKRemoteAccessError},
		{"flush past the region", 0, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal, FlushRange, ctxMemBase+64<<10-4, c.MR.RKey, 8)
		}, 0, bth.NAKRemoteAccessError},
		{"flush region without flush access", 0, accessAll &^ AccessFlushGlobal, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal, FlushRange, ctxMemBase, c.MR.RKey, 8)
		}, 0, bth.NAKRemoteAccessError},
		{"flush QP without flush access", accessAll &^ AccessFlushGlobal, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal, FlushRange, ctxMemBase, c.MR.RKey, 8)
		}, 0, bth.NAKInvalidRequest},
		{"persistent flush, QP without access", 0, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushPersistent, FlushRange, ctxMemBase, c.MR.RKey, 8)
		}, 0, bth.NAKInvalidRequest},
		{"persistent flush, region not persistent", accessQP, 0, bth.RCFlush, func(c *Context) *bth.PacketFields {
			return flushFields(FlushGlobal|FlushPersistent, FlushMR, ctxMemBase, c.MR.RKey, 8)
		}, 0, bth.NAKRemoteAccessError},
		{"atomic write bad rkey", 0, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			return awFields(ctxMemBase, c.MR.RKey+1)
		}, 8, bth.NAKRemoteAccessError},
		{"atomic write past the region", 0, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			return awFields(ctxMemBase+64<<10-4, c.MR.RKey)
		}, 8, bth.NAKRemoteAccessError},
		{"atomic write misaligned", 0, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			return awFields(ctxMemBase+4, c.MR.RKey)
		}, 8, bth.NAKInvalidRequest},
		{"atomic write of 16 bytes", 0, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			f := awFields(ctxMemBase, c.MR.RKey)
			f.RETH.DMALen = 16
			return f
		}, 16, bth.NAKInvalidRequest},
		{"atomic write of 4 bytes", 0, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			f := awFields(ctxMemBase, c.MR.RKey)
			f.RETH.DMALen = 4
			return f
		}, 4, bth.NAKInvalidRequest},
		{"atomic write QP without remote write", accessAll &^ AccessRemoteWrite, 0, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			return awFields(ctxMemBase, c.MR.RKey)
		}, 8, bth.NAKInvalidRequest},
		{"atomic write region without remote write", 0, AccessLocalWrite | AccessRemoteRead, bth.RCAtomicWrite, func(c *Context) *bth.PacketFields {
			return awFields(ctxMemBase, c.MR.RKey)
		}, 8, bth.NAKRemoteAccessError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			if tc.qp != 0 {
				c.modify(&Attr{AccessFlags: tc.qp}, AttrAccessFlags)
			}
			if tc.mr != 0 {
				if err := c.E.MRs.Deregister(c.MR.RKey); err != nil {
					t.Fatal(err)
				}
				var err error
				if c.MR, err = c.E.MRs.Register(1, c.Mem, ctxMemBase, tc.mr); err != nil {
					t.Fatal(err)
				}
			}
			before := append([]byte(nil), c.Mem...)
			c.SendRequest(tc.op, tc.f(c), bytes.Repeat([]byte{0x5a}, tc.pay), true)
			c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(bth.NAK(tc.code), 0))
			if c.QP.State() != StateErr {
				t.Errorf("state %v, want ERR", c.QP.State())
			}
			if !bytes.Equal(before, c.Mem) {
				t.Error("memory changed")
			}
		})
	}
}

// TestResponderFlushResourceLimit: FLUSH and ATOMIC WRITE hold a responder
// resource until their answer is out, like READ and atomics, and one
// request past max_dest_rd_atomic is an invalid request.
func TestResponderFlushResourceLimit(t *testing.T) {
	c := New(t) // max_dest_rd_atomic 4
	defer c.Cleanup()
	c.Port.free = 0 // no answer can go out
	for i := range 4 {
		if i%2 == 0 {
			c.SendRequest(bth.RCFlush, flushFields(FlushGlobal, FlushRange, ctxMemBase, c.MR.RKey, 8), nil, true)
		} else {
			c.SendRequest(bth.RCAtomicWrite, awFields(ctxMemBase+8*uint64(i), c.MR.RKey), make([]byte, 8), true)
		}
	}
	if c.QP.State() != StateRTS || c.QP.Counters().TooManyRdAtomic != 0 {
		t.Fatalf("state %v after 4 requests, %d over the limit", c.QP.State(), c.QP.Counters().TooManyRdAtomic)
	}
	c.SendRequest(bth.RCAtomicWrite, awFields(ctxMemBase+64, c.MR.RKey), make([]byte, 8), true)
	if c.QP.Counters().TooManyRdAtomic != 1 || c.QP.State() != StateErr {
		t.Fatalf("fifth request: %d over the limit, state %v", c.QP.Counters().TooManyRdAtomic, c.QP.State())
	}
}

func TestPostSendFlushAtomicWriteChecks(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	sge := SGE{Addr: ctxMemBase, Length: 8, LKey: c.MR.LKey}
	for _, tc := range []struct {
		name string
		wr   SendWR
	}{
		{"flush with data", SendWR{Opcode: WRFlush, SGL: []SGE{sge}}},
		{"atomic write of 4 bytes", SendWR{Opcode: WRAtomicWrite, SGL: []SGE{{Addr: ctxMemBase, Length: 4, LKey: c.MR.LKey}}}},
		{"atomic write of 16 inline bytes", SendWR{Opcode: WRAtomicWrite, Flags: FlagInline, InlineData: make([]byte, 16)}},
	} {
		if err := c.QP.PostSend(c.Now, &tc.wr); !errors.Is(err, ErrBadWR) {
			t.Errorf("%s: %v, want ErrBadWR", tc.name, err)
		}
	}
	p := newUCPair(t, accessAll)
	for _, op := range []WROpcode{WRFlush, WRAtomicWrite} {
		wr := SendWR{Opcode: op, Flags: FlagInline, InlineData: make([]byte, 8)}
		if op == WRFlush {
			wr.InlineData = nil
		}
		if err := p.a.qp.PostSend(p.now, &wr); !errors.Is(err, ErrBadWR) {
			t.Errorf("%s on UC: %v, want ErrBadWR", op, err)
		}
	}
	if _, err := c.E.MRs.Register(1, make([]byte, 64), 0x1000, AccessFlushGlobal|AccessFlushPersistent); !errors.Is(err, ErrBadMR) {
		t.Errorf("persistent region: %v, want ErrBadMR", err)
	}
}

// TestFlushAtomicWritePair runs both operations between two engines, the
// requester's packets and completions with the responder's, clean and
// under loss: every ATOMIC WRITE lands once, in order with the WRITEs, and
// every WR completes with its own opcode.
func TestFlushAtomicWritePair(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults netem.Faults
		rd     uint8
	}{
		{"clean", netem.Faults{}, 16},
		{"one credit", netem.Faults{}, 1},
		{"lossy", netem.Faults{Drop: 0.05, Duplicate: 0.02, Reorder: 0.02}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, faults: tc.faults, seed: 7, retry: 7, rnrRetry: 7, timeout: 8, rdAtomic: tc.rd})
			a, b := p.a, p.b
			const n = 60
			for i := range n {
				binary.NativeEndian.PutUint64(a.mem[8*i:], uint64(i)*0x0101010101010101+1)
			}
			posted := 0
			ids := map[uint64]WCOpcode{}
			post := func(wr *SendWR, want WCOpcode) {
				wr.ID = uint64(posted)
				wr.Flags |= FlagSignaled
				ids[wr.ID] = want
				posted++
				if err := a.qp.PostSend(p.now, wr); err != nil {
					t.Fatal(err)
				}
			}
			got := 0
			poll := func() bool {
				k := a.scq.Poll(a.wc[:])
				for _, wc := range a.wc[:k] {
					if wc.Status != WCSuccess || wc.Opcode != ids[wc.WRID] {
						t.Fatalf("completion %+v, want %v success", wc, ids[wc.WRID])
					}
					if wc.Opcode == WCAtomicWrite && wc.ByteLen != 8 || wc.Opcode == WCFlush && wc.ByteLen != 4096 {
						t.Errorf("%v ByteLen %d", wc.Opcode, wc.ByteLen)
					}
				}
				got += k
				return got == posted
			}
			for i := range n {
				// A WRITE of 100 bytes, an ATOMIC WRITE after it from the
				// SGL or inline, and a FLUSH of both every few.
				post(&SendWR{Opcode: WRWrite, SGL: []SGE{a.sge(4096+100*i, 100)}, RemoteAddr: memBase + 65536 + 100*uint64(i), RKey: b.mr.RKey}, WCWrite)
				aw := &SendWR{Opcode: WRAtomicWrite, SGL: []SGE{a.sge(8*i, 8)}, RemoteAddr: memBase + 8192 + 8*uint64(i), RKey: b.mr.RKey}
				if i%2 == 1 {
					aw.SGL, aw.Flags, aw.InlineData = nil, FlagInline, a.mem[8*i:8*i+8]
				}
				post(aw, WCAtomicWrite)
				if i%5 == 4 {
					lvl := FlushRange
					if i%10 == 9 {
						lvl = FlushMR
					}
					post(&SendWR{Opcode: WRFlush, FlushType: FlushGlobal, FlushLevel: lvl, FlushLen: 4096, RemoteAddr: memBase + 8192, RKey: b.mr.RKey}, WCFlush)
				}
				if a.qp.sq.tail-a.qp.sq.head > 100 {
					p.run(func() bool { poll(); return a.qp.sq.tail-a.qp.sq.head < 50 })
				}
			}
			p.run(poll)
			if !bytes.Equal(b.mem[8192:8192+8*n], a.mem[:8*n]) {
				t.Fatal("atomic writes landed wrong")
			}
			if !bytes.Equal(b.mem[65536:65536+100*n], a.mem[4096:4096+100*n]) {
				t.Fatal("writes landed wrong")
			}
			if tc.faults.Drop == 0 && a.qp.Counters().Retransmits != 0 {
				t.Errorf("%d retransmits on a clean path", a.qp.Counters().Retransmits)
			}
			if tc.faults.Drop != 0 && (a.qp.Counters().Retransmits == 0 || b.qp.Counters().DupRequests == 0) {
				t.Errorf("loss left no mark: %d retransmits, %d duplicates", a.qp.Counters().Retransmits, b.qp.Counters().DupRequests)
			}
			t.Logf("%d WRs, %d retransmits, %d duplicates answered", posted, a.qp.Counters().Retransmits, b.qp.Counters().DupRequests)
		})
	}
}

// TestFlushAtomicWriteRemoteErrors: the requester completes a NAKed FLUSH
// or ATOMIC WRITE with the status rxe's completer gives.
func TestFlushAtomicWriteRemoteErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		wr   func(p *pair) SendWR
		want WCStatus
	}{
		{"flush bad rkey", func(p *pair) SendWR {
			return SendWR{Opcode: WRFlush, FlushType: FlushGlobal, FlushLen: 8, RemoteAddr: memBase, RKey: p.b.mr.RKey + 1}
		}, WCRemAccessErr},
		{"persistent flush", func(p *pair) SendWR {
			return SendWR{Opcode: WRFlush, FlushType: FlushPersistent, FlushLen: 8, RemoteAddr: memBase, RKey: p.b.mr.RKey}
		}, WCRemInvReqErr},
		{"atomic write misaligned", func(p *pair) SendWR {
			return SendWR{Opcode: WRAtomicWrite, Flags: FlagInline, InlineData: make([]byte, 8), RemoteAddr: memBase + 1, RKey: p.b.mr.RKey}
		}, WCRemInvReqErr},
		{"atomic write bad rkey", func(p *pair) SendWR {
			return SendWR{Opcode: WRAtomicWrite, Flags: FlagInline, InlineData: make([]byte, 8), RemoteAddr: memBase, RKey: p.b.mr.RKey ^ 0x100}
		}, WCRemAccessErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
			wr := tc.wr(p)
			wr.Flags |= FlagSignaled
			if err := p.a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			var wc Completion
			p.run(func() bool { return p.a.scq.Poll(p.a.wc[:1]) == 1 && func() bool { wc = p.a.wc[0]; return true }() })
			if wc.Status != tc.want || wc.Opcode != wcOpcodeOf[wr.Opcode] {
				t.Errorf("completion %v %v, want %v", wc.Opcode, wc.Status, tc.want)
			}
		})
	}
}

// BenchmarkFlushAtomicWrite times one signaled ATOMIC WRITE or FLUSH round
// trip: the hot path allocates nothing.
func BenchmarkFlushAtomicWrite(b *testing.B) {
	for _, op := range []WROpcode{WRAtomicWrite, WRFlush} {
		b.Run(op.String(), func(b *testing.B) {
			p := newPair(b, pairConfig{mtu: 4096, retry: 7, rnrRetry: 7, mem: 1 << 17})
			wr := SendWR{Opcode: op, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase + 65536, RKey: p.b.mr.RKey}
			if op == WRFlush {
				wr.SGL, wr.FlushType, wr.FlushLen = nil, FlushGlobal, 4096
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := p.a.qp.PostSend(p.now, &wr); err != nil {
					b.Fatal(err)
				}
				p.pump(p.a.scq, 1)
				if p.a.scq.Poll(p.a.wc[:]) != 1 || p.a.wc[0].Status != WCSuccess {
					b.Fatalf("completion %+v", p.a.wc[0])
				}
			}
		})
	}
}

// TestRequesterFlushAtomicWrite checks the requests on the wire, as rxe's
// init_req_packet builds them (FETH then RETH; RETH and 8 bytes), the
// initiator depth an ATOMIC WRITE counts against and a FLUSH does not, and
// the completions for either answer rxe's completer takes.
func TestRequesterFlushAtomicWrite(t *testing.T) {
	c := New(t) // max_rd_atomic 4
	defer c.Cleanup()
	psn := bth.PSN(ctxSQPSN)
	c.PostSend(&SendWR{ID: 1, Opcode: WRFlush, Flags: FlagSignaled, FlushType: FlushGlobal, FlushLevel: FlushMR, FlushLen: 300, RemoteAddr: 0x5000, RKey: 0x77})
	p := c.Expect(opcodeIs(bth.RCFlush), psnIs(psn), ackReqIs(true), payloadLen(0))
	if f := p.FETH(); f.PlacementType() != 1 || f.Selectivity() != 1 {
		t.Errorf("FETH PLT %d SEL %d", f.PlacementType(), f.Selectivity())
	}
	if r := p.RETH(); r.VA() != 0x5000 || r.RKey() != 0x77 || r.DMALen() != 300 {
		t.Errorf("RETH %#x %#x %d", r.VA(), r.RKey(), r.DMALen())
	}
	val := []byte{8, 7, 6, 5, 4, 3, 2, 1}
	for i := range 5 {
		c.PostSend(&SendWR{ID: uint64(10 + i), Opcode: WRAtomicWrite, Flags: FlagSignaled | FlagInline, InlineData: val, RemoteAddr: 0x6000 + 8*uint64(i), RKey: 0x88})
	}
	for i := range 4 {
		p = c.Expect(opcodeIs(bth.RCAtomicWrite), psnIs(psn.Add(1+i)), ackReqIs(true), payloadLen(8))
		if r := p.RETH(); r.VA() != 0x6000+8*uint64(i) || r.RKey() != 0x88 || r.DMALen() != 8 || !bytes.Equal(p.Payload(), val) {
			t.Errorf("ATOMIC WRITE %d: RETH %#x %#x %d, payload % x", i, r.VA(), r.RKey(), r.DMALen(), p.Payload())
		}
	}
	// Four credits are out: the fifth waits, a FLUSH behind it too (the
	// send queue is in order).
	c.CheckNoPacket()
	// rxe answers a FLUSH with a zero-length READ Response Only; that
	// frees nothing, as the FLUSH held no credit.
	c.SendPacket(answer(bth.RCReadResponseOnly, psn, 1), nil)
	c.E.Process(c.Now)
	c.CheckNoPacket()
	if wc := c.PollOne(c.SCQ); wc.WRID != 1 || wc.Opcode != WCFlush || wc.Status != WCSuccess || wc.ByteLen != 300 {
		t.Fatalf("flush completion %+v", wc)
	}
	// An ATOMIC WRITE answered by a READ Response Only, the next by a
	// plain ACK covering two (rxe's completer takes either).
	c.SendPacket(answer(bth.RCReadResponseOnly, psn.Add(1), 2), nil)
	c.E.Process(c.Now)
	c.Expect(opcodeIs(bth.RCAtomicWrite), psnIs(psn.Add(5)))
	c.SendPacket(answer(bth.RCAcknowledge, psn.Add(3), 4), nil)
	c.SendPacket(answer(bth.RCReadResponseOnly, psn.Add(4), 5), nil)
	c.SendPacket(answer(bth.RCReadResponseOnly, psn.Add(5), 6), nil)
	c.E.Process(c.Now)
	var wc [8]Completion
	if n := c.SCQ.Poll(wc[:]); n != 5 {
		t.Fatalf("%d completions, want 5: %+v", n, wc[:n])
	}
	for i, w := range wc[:5] {
		if w.WRID != uint64(10+i) || w.Opcode != WCAtomicWrite || w.Status != WCSuccess || w.ByteLen != 8 {
			t.Errorf("completion %d: %+v", i, w)
		}
	}
	// A READ Response with data is no answer to an ATOMIC WRITE.
	c.PostSend(&SendWR{ID: 20, Opcode: WRAtomicWrite, Flags: FlagSignaled | FlagInline, InlineData: val, RemoteAddr: 0x6000, RKey: 0x88})
	c.Expect(opcodeIs(bth.RCAtomicWrite), psnIs(psn.Add(6)))
	c.SendPacket(answer(bth.RCReadResponseOnly, psn.Add(6), 7), make([]byte, 8))
	c.E.Process(c.Now)
	if w := c.PollOne(c.SCQ); w.WRID != 20 || w.Status != WCBadRespErr {
		t.Errorf("ATOMIC WRITE answered with data: %+v", w)
	}
}

// answer returns an ACK or READ response from the peer with an ACK
// syndrome.
func answer(op bth.Opcode, psn bth.PSN, msn uint32) *bth.PacketFields {
	f := &bth.PacketFields{BTH: bth.BTHFields{Opcode: op, PSN: psn}}
	f.AETH.Syndrome, f.AETH.MSN = ack, msn
	return f
}
