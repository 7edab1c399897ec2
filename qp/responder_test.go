package qp

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
)

func TestResponderSendAndAck(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	// A three-packet SEND across the PSN wrap, AckReq only on the last.
	msg := make([]byte, 2*ctxMTU+5)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	first := c.PeerPSN
	c.SendRequest(bth.RCSendFirst, nil, msg[:ctxMTU], false)
	c.SendRequest(bth.RCSendMiddle, nil, msg[ctxMTU:2*ctxMTU], false)
	c.CheckNoPacket()
	c.SendRequest(bth.RCSendLastImm, &bth.PacketFields{ImmDt: 0xdeadbeef}, msg[2*ctxMTU:], true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(first.Add(2)), aethIs(ack, 1))
	wc := c.PollOne(c.RCQ)
	if wc.Status != WCSuccess || wc.Opcode != WCRecv || wc.ByteLen != uint32(len(msg)) || wc.Imm != 0xdeadbeef || wc.Flags&WCWithImm == 0 || wc.WRID != 100 || wc.SrcQP != c.PeerQPN {
		t.Fatalf("completion %+v", wc)
	}
	if !bytes.Equal(c.Mem[0x8000:0x8000+len(msg)], msg) {
		t.Fatal("data differs")
	}
	// The duplicate is ACKed again, not executed again (C9-105).
	c.PeerPSN = first.Add(2)
	c.SendRequest(bth.RCSendLastImm, &bth.PacketFields{ImmDt: 1}, msg[2*ctxMTU:], true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(first.Add(2)), aethIs(ack, 1))
	if c.RCQ.Len() != 0 {
		t.Fatal("duplicate completed a receive")
	}
}

// TestResponderCoalescesAcks: the requests of one receive burst that ask
// for an ACK get one, for the last of them (IBA 9.7.5.1.2); an ACK due
// goes out before a READ response or a NAK that follows it in the burst,
// so the answers keep PSN order.
func TestResponderCoalescesAcks(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	reth := bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}
	data := []byte("12345678")
	first := c.PeerPSN
	c.HoldBurst()
	for range 3 {
		c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: reth}, data, true)
	}
	c.ReceiveBurst()
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(first.Add(2)), aethIs(ack, 3))
	c.CheckNoPacket()

	// WRITE, READ: the WRITE's ACK, then the READ response.
	wpsn := c.PeerPSN
	c.HoldBurst()
	c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: reth}, data, true)
	c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: reth}, nil, true)
	c.ReceiveBurst()
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(wpsn), aethIs(ack, 4))
	c.Expect(opcodeIs(bth.RCReadResponseOnly), psnIs(wpsn.Add(1)), aethIs(ack, 5), payloadLen(8))

	// WRITE, then a gap: the ACK, then the sequence NAK.
	wpsn = c.PeerPSN
	c.HoldBurst()
	c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: reth}, data, true)
	c.PeerPSN = c.PeerPSN.Next()
	c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: reth}, data, true)
	c.ReceiveBurst()
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(wpsn), aethIs(ack, 6))
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(wpsn.Add(1)), aethIs(bth.NAK(bth.NAKPSNSequenceError), 6))
	c.CheckNoPacket()
}

func TestResponderSequenceNAKOnce(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	want := c.PeerPSN
	c.PeerPSN = c.PeerPSN.Add(2)
	c.SendRequest(bth.RCSendOnly, nil, []byte("x"), true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(want), aethIs(bth.NAK(bth.NAKPSNSequenceError), 0))
	c.SendRequest(bth.RCSendOnly, nil, []byte("y"), true)
	c.CheckNoPacket() // one NAK until the expected PSN arrives
	c.PeerPSN = want
	c.SendRequest(bth.RCSendOnly, nil, []byte("z"), true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(want), aethIs(ack, 1))
}

func TestResponderWriteReadAtomic(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	data := bytes.Repeat([]byte{0xab}, ctxMTU+3)
	reth := bth.RETHFields{VA: ctxMemBase + 100, RKey: c.MR.RKey, DMALen: uint32(len(data))}
	c.SendRequest(bth.RCWriteFirst, &bth.PacketFields{RETH: reth}, data[:ctxMTU], false)
	c.SendRequest(bth.RCWriteLast, nil, data[ctxMTU:], true)
	c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(ack, 1))
	if !bytes.Equal(c.Mem[100:100+len(data)], data) || c.Mem[99] != 0 || c.Mem[100+len(data)] != 0 {
		t.Fatal("write landed wrong")
	}
	// READ of 2 MTUs + 1: FIRST and LAST carry an AETH, MIDDLE not.
	rpsn := c.PeerPSN
	c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 2*ctxMTU + 1}}, nil, true)
	c.PeerPSN = rpsn.Add(3)
	c.Expect(opcodeIs(bth.RCReadResponseFirst), psnIs(rpsn), aethIs(ack, 2), payloadLen(ctxMTU))
	p := c.Expect(opcodeIs(bth.RCReadResponseMiddle), psnIs(rpsn.Add(1)), payloadLen(ctxMTU))
	if p.AETH() != nil {
		t.Error("MIDDLE carries an AETH")
	}
	p = c.Expect(opcodeIs(bth.RCReadResponseLast), psnIs(rpsn.Add(2)), aethIs(ack, 2), payloadLen(1))
	if !bytes.Equal(p.Payload(), c.Mem[2*ctxMTU:2*ctxMTU+1]) {
		t.Error("read data")
	}
	// A replay from the middle continues with MIDDLE/LAST.
	save := c.PeerPSN
	c.PeerPSN = rpsn.Add(1)
	c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + ctxMTU, RKey: c.MR.RKey, DMALen: ctxMTU + 1}}, nil, true)
	c.Expect(opcodeIs(bth.RCReadResponseMiddle), psnIs(rpsn.Add(1)))
	c.Expect(opcodeIs(bth.RCReadResponseLast), psnIs(rpsn.Add(2)), aethIs(ack, 2))
	c.PeerPSN = save
	// Fetch-and-add, then its duplicate answered from the cache.
	binary.NativeEndian.PutUint64(c.Mem[64:], 40)
	apsn := c.PeerPSN
	fa := &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 64, RKey: c.MR.RKey, SwapAdd: 2}}
	c.SendRequest(bth.RCFetchAdd, fa, nil, true)
	p = c.Expect(opcodeIs(bth.RCAtomicAcknowledge), psnIs(apsn), aethIs(ack, 3))
	if p.AtomicAckETH().OrigData() != 40 {
		t.Errorf("orig %d", p.AtomicAckETH().OrigData())
	}
	c.PeerPSN = apsn
	c.SendRequest(bth.RCFetchAdd, fa, nil, true)
	p = c.Expect(opcodeIs(bth.RCAtomicAcknowledge), psnIs(apsn))
	if p.AtomicAckETH().OrigData() != 40 || binary.NativeEndian.Uint64(c.Mem[64:]) != 42 {
		t.Errorf("duplicate atomic executed again: orig %d, memory %d", p.AtomicAckETH().OrigData(), binary.NativeEndian.Uint64(c.Mem[64:]))
	}
	// Compare-and-swap.
	c.SendRequest(bth.RCCompareSwap, &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 64, RKey: c.MR.RKey, Compare: 42, SwapAdd: 7}}, nil, true)
	c.Expect(opcodeIs(bth.RCAtomicAcknowledge), aethIs(ack, 4))
	if binary.NativeEndian.Uint64(c.Mem[64:]) != 7 {
		t.Error("compare-and-swap did not swap")
	}
}

func TestResponderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   bth.Opcode
		f    func(c *Context) *bth.PacketFields
		pay  int
		code bth.NAKCode
	}{
		{"bad rkey", bth.RCWriteOnly, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey + 1, DMALen: 4}}
		}, 4, bth.NAKRemoteAccessError},
		{"out of bounds", bth.RCWriteOnly, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 64<<10 - 2, RKey: c.MR.RKey, DMALen: 4}}
		}, 4, bth.NAKRemoteAccessError},
		{"read below region", bth.RCReadRequest, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase - 1, RKey: c.MR.RKey, DMALen: 4}}
		}, 0, bth.NAKRemoteAccessError},
		{"misaligned atomic", bth.RCFetchAdd, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 4, RKey: c.MR.RKey}}
		}, 0, bth.NAKInvalidRequest},
		{"missing first", bth.RCSendMiddle, func(*Context) *bth.PacketFields { return nil }, ctxMTU, bth.NAKInvalidRequest},
		{"only too long", bth.RCSendOnly, func(*Context) *bth.PacketFields { return nil }, ctxMTU + 4, bth.NAKInvalidRequest},
		{"write length mismatch", bth.RCWriteOnly, func(c *Context) *bth.PacketFields {
			return &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: 8}}
		}, 4, bth.NAKInvalidRequest},
		{"send overruns receive", bth.RCSendFirst, nil, 0, bth.NAKInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			before := append([]byte(nil), c.Mem...)
			if tc.f == nil {
				// 5 MTU packets into a 4 KiB receive.
				for range 4 {
					c.SendRequest(bth.RCSendMiddle-1+bth.Opcode(min(1, int(c.PeerPSN-ctxRQPSN))), nil, make([]byte, ctxMTU), false)
				}
				c.SendRequest(bth.RCSendLast, nil, make([]byte, 8), true)
			} else {
				c.SendRequest(tc.op, tc.f(c), make([]byte, tc.pay), true)
			}
			c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(bth.NAK(tc.code), 0))
			if c.QP.State() != StateErr {
				t.Errorf("state %v, want ERR", c.QP.State())
			}
			if tc.f != nil && !bytes.Equal(before, c.Mem) {
				t.Error("memory changed")
			}
			var wc [8]Completion
			n := c.RCQ.Poll(wc[:])
			if n != 4 {
				t.Fatalf("%d receive completions, want 4", n)
			}
			if tc.f == nil && wc[0].Status != WCLocLenErr {
				t.Errorf("overrun completes %v", wc[0].Status)
			}
			for _, w := range wc[1:n] {
				if w.Status != WCWRFlushErr {
					t.Errorf("status %v, want flush", w.Status)
				}
			}
		})
	}
}

func TestResponderRNR(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	for range 4 {
		c.SendRequest(bth.RCSendOnly, nil, []byte("a"), false)
	}
	psn := c.PeerPSN
	c.SendRequest(bth.RCSendOnly, nil, []byte("b"), true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(psn), aethIs(bth.RNRNAK(12), 4))
	c.PostRecv(7, SGE{Addr: ctxMemBase, Length: 16, LKey: c.MR.LKey})
	c.PeerPSN = psn
	c.SendRequest(bth.RCSendOnly, nil, []byte("b"), true)
	c.Expect(opcodeIs(bth.RCAcknowledge), psnIs(psn), aethIs(ack, 5))
	_ = time.Second
}

// TestWriteSeqOK: respondWrite's check of a WRITE's opcode sequence agrees
// with opSeqOK for every opcode the message in progress can have.
func TestWriteSeqOK(t *testing.T) {
	for prev := 0; prev < 256; prev++ {
		for _, op := range []bth.Opcode{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteOnly} {
			if got, want := writeSeqOK(bth.Opcode(prev), op), opSeqOK(bth.Opcode(prev), op); got != want {
				t.Errorf("after %#x, %v: %v, opSeqOK says %v", prev, op, got, want)
			}
		}
	}
}
