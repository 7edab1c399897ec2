package verbs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// postSendRetry posts wr, sleeping briefly while the send queue is full.
func postSendRetry(q *verbs.QueuePair, wr *verbs.SendWR) error {
	for {
		err := q.PostSend(wr)
		if !errors.Is(err, verbs.ErrQueueFull) {
			return err
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// TestBackgroundConcurrent: in background mode, goroutines post and wait
// while the devices' goroutines drive the engines (run with -race).
func TestBackgroundConcurrent(t *testing.T) {
	a, b, qa, _, ma, mb, ca, _ := connectedPair()
	defer a.Close()
	defer b.Close()
	a.Start()
	b.Start()
	for i := range ma.Buf() {
		ma.Buf()[i] = byte(i)
	}
	const n = 500
	errc := make(chan error, 1)
	// At most 32 WRs between post and poll, so the 64-entry CQ (shared
	// with receives) cannot overflow, as verbs requires of applications.
	tokens := make(chan struct{}, 32)
	go func() {
		for i := range n {
			tokens <- struct{}{}
			wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{ma.SGE(i%64*1024, 1024)}, RemoteAddr: mb.Addr() + uint64(i%64*1024), RKey: mb.RKey()}
			if err := postSendRetry(qa, &wr); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wc [16]verbs.WC
	next := 0
	for next < n {
		k, err := ca.Wait(ctx, wc[:])
		if err != nil {
			t.Fatalf("after %d completions: %v", next, err)
		}
		for _, w := range wc[:k] {
			if w.WRID != uint64(next) || w.Status != verbs.WCSuccess {
				t.Fatalf("completion %+v, want WR %d (overflow %v)", w, next, ca.Overflowed())
			}
			next++
			<-tokens
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mb.Buf(), ma.Buf()) {
		t.Fatal("data differs")
	}
	if c := a.Counters(); c.CompletedSends != n {
		t.Errorf("counters %+v", c)
	}
}

func TestModifyChecks(t *testing.T) {
	a, b, qa, _, _, _, _, _ := connectedPair()
	defer a.Close()
	defer b.Close()
	if err := qa.Modify(&verbs.QPAttr{State: verbs.StateRTR}, 1); !errors.Is(err, verbs.ErrBadTransition) {
		t.Errorf("RTS to RTR: %v", err)
	}
	if got := a.GIDs()[0]; !got.Is4In6() {
		t.Errorf("GID %v is not IPv4-mapped", got)
	}
}

// TestClose: Close ends a Wait blocked in either mode and later posts
// fail with ErrClosed; a second Close is a no-op.
func TestClose(t *testing.T) {
	for _, background := range []bool{false, true} {
		a, b, qa, qb, ma, mb, ca, _ := connectedPair()
		if background {
			a.Start()
		}
		errc := make(chan error, 1)
		go func() {
			var wc [1]verbs.WC
			_, err := ca.Wait(context.Background(), wc[:])
			errc <- err
		}()
		time.Sleep(10 * time.Millisecond) // let it block (not required for the check)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("background %v: Wait after Close: %v", background, err)
		}
		wr := verbs.SendWR{Opcode: verbs.WRWrite, SGL: []verbs.SGE{ma.SGE(0, 8)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}
		if err := qa.PostSend(&wr); !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("background %v: PostSend after Close: %v", background, err)
		}
		if err := qa.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{ma.SGE(0, 8)}}); !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("background %v: PostRecv after Close: %v", background, err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		_ = qb
		b.Close()
	}
}

// connectRC connects qa (PSN 1000) and qb (PSN 2000) to each other.
func connectRC(t testing.TB, qa, qb *verbs.QueuePair) {
	t.Helper()
	if err := qa.Connect(qb.Endpoint(2000), verbs.ConnectOptions{PSN: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.Endpoint(1000), verbs.ConnectOptions{PSN: 2000}); err != nil {
		t.Fatal(err)
	}
}
