package rpc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/verbs"
)

// TestVerbsRepostWhileSending checks verbs under the rpc layer's pattern:
// on each device one goroutine waits on the CQ and reposts each receive
// buffer once it has checked its payload, while other goroutines post
// inline SENDs. Every payload must arrive intact in the buffer its
// completion names.
func TestVerbsRepostWhileSending(t *testing.T) {
	da, db, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	defer da.Close()
	defer db.Close()
	const senders, each, size, recvs = 4, 300, 64, 16
	type side struct {
		q  *verbs.QueuePair
		cq *verbs.CQ
		mr *verbs.MR
		wr []verbs.RecvWR
	}
	mk := func(d *verbs.Device) *side {
		pd := d.AllocPD()
		s := &side{cq: d.CreateCQ(4 * senders * each)}
		s.q, err = pd.CreateQP(&verbs.QPInit{SendCQ: s.cq, RecvCQ: s.cq, Cap: verbs.QPCap{MaxSendWR: senders * each, MaxRecvWR: recvs, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: size}})
		if err != nil {
			t.Fatal(err)
		}
		if s.mr, err = pd.RegMR(make([]byte, recvs*size), verbs.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		for i := range recvs {
			s.wr = append(s.wr, verbs.RecvWR{ID: 1<<63 | uint64(i), SGL: []verbs.SGE{s.mr.SGE(i*size, size)}})
		}
		return s
	}
	a, b := mk(da), mk(db)
	if err := a.q.Connect(b.q.Endpoint(2), verbs.ConnectOptions{PSN: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Connect(a.q.Endpoint(1), verbs.ConnectOptions{PSN: 2}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*side{a, b} {
		for i := range s.wr {
			if err := s.q.PostRecv(&s.wr[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill := func(msg []byte, id uint32) {
		for j := range msg {
			msg[j] = byte(id) + byte(j)
		}
		binary.BigEndian.PutUint32(msg, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg, disp sync.WaitGroup
	errs := make(chan error, 2+2*senders)
	var got atomic.Int64
	// Both dispatchers run until both sides have everything: in inline
	// mode a side's engine (its RNR retries) runs only while it is polled.
	stop, halt := context.WithCancel(ctx)
	defer halt()
	for _, s := range []*side{a, b} {
		disp.Go(func() {
			var wc [16]verbs.WC
			want := make([]byte, size)
			for {
				n, err := s.cq.Wait(stop, wc[:])
				if err != nil {
					if ctx.Err() != nil {
						errs <- err
					}
					return
				}
				for _, w := range wc[:n] {
					if w.Status != verbs.WCSuccess {
						errs <- fmt.Errorf("status %v", w.Status)
						return
					}
					if w.WRID>>63 == 0 {
						continue
					}
					i := int(w.WRID &^ (1 << 63))
					fill(want, w.Imm)
					if p := s.mr.Buf()[i*size : i*size+int(w.ByteLen)]; !bytes.Equal(p, want) {
						errs <- fmt.Errorf("buffer %d imm %d: payload % x", i, w.Imm, p[:8])
						return
					}
					if got.Add(1) == 2*senders*each {
						halt()
					}
					if err := s.q.PostRecv(&s.wr[i]); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	for _, s := range []*side{a, b} {
		for g := range senders {
			wg.Go(func() {
				msg := make([]byte, size)
				for k := range each {
					id := uint32(g*each + k)
					fill(msg, id)
					if err := s.q.PostSend(&verbs.SendWR{ID: uint64(id), Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled | verbs.SendInline, Imm: id, InlineData: msg}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	disp.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
