package verbs_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/uroce/uroce/verbs"
)

// TestZeroAlloc: in steady state a WRITE and a SEND with its receive cost
// no allocation, neither inline (PostSend and Poll run the engine on the
// caller's goroutine) nor handed over to background goroutines (request
// slots and completion rings are reused). AllocsPerRun counts every
// goroutine's allocations, the devices' own included.
func TestZeroAlloc(t *testing.T) {
	for _, background := range []bool{false, true} {
		name := map[bool]string{false: "inline", true: "background"}[background]
		t.Run(name, func(t *testing.T) {
			a, b, qa, qb, ma, mb, ca, cb := connectedPair()
			defer a.Close()
			defer b.Close()
			if background {
				a.Start()
				b.Start()
			}
			var wc [1]verbs.WC
			wait := func(cq, other *verbs.CQ) {
				if background {
					if _, err := cq.Wait(context.Background(), wc[:]); err != nil {
						t.Fatal(err)
					}
				} else {
					wc[0] = waitOne(cq, other)
				}
				if wc[0].Status != verbs.WCSuccess {
					t.Fatalf("completion %+v", wc[0])
				}
			}
			write := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ma.SGE(0, 3000)},
				RemoteAddr: mb.Addr(), RKey: mb.RKey()}
			send := verbs.SendWR{Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ma.SGE(0, 100)}}
			recv := verbs.RecvWR{SGL: []verbs.SGE{mb.SGE(0, 128)}}
			op := func() {
				if err := qa.PostSend(&write); err != nil {
					t.Fatal(err)
				}
				wait(ca, cb)
				if err := qb.PostRecv(&recv); err != nil {
					t.Fatal(err)
				}
				if err := qa.PostSend(&send); err != nil {
					t.Fatal(err)
				}
				wait(cb, ca)
				wait(ca, cb)
			}
			for range 100 { // warm-up: buffer pools, request slots
				op()
			}
			if n := testing.AllocsPerRun(500, op); n != 0 {
				t.Errorf("%v allocations per WRITE and SEND", n)
			}
		})
	}
}

// TestSendWRFields: PostSend's hand-over (and qp's send queue) copy a
// SendWR field by field, so that the caller's SGL does not escape; a new
// field must be added to those copies.
func TestSendWRFields(t *testing.T) {
	if n := reflect.TypeFor[verbs.SendWR]().NumField(); n != 19 {
		t.Errorf("SendWR has %d fields; copy the new ones in QueuePair.PostSend and qp.QP.PostSend, then update this test", n)
	}
}

// TestPostInLoopNoAlloc: a WR built afresh for every post, SGL literal
// included, stays on the caller's stack.
func TestPostInLoopNoAlloc(t *testing.T) {
	a, b, qa, _, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	op := func() {
		err := qa.PostSend(&verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ma.SGE(0, 64)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()})
		if err != nil {
			t.Fatal(err)
		}
		waitOne(ca, cb)
	}
	for range 100 {
		op()
	}
	if n := testing.AllocsPerRun(200, op); n != 0 {
		t.Errorf("%v allocations per post", n)
	}
}
