package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/rpc"
)

// long bounds waits that only detect a hang; nothing is timed against it.
const long = 60 * time.Second

func setup(t *testing.T, l Layout) (*Client, *Server) {
	t.Helper()
	dc, ds, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close(); ds.Close() })
	ds.Start() // READs are served while the RPC goroutine writes
	cfg := rpc.Config{Slots: 16, MaxMsg: 4096}
	srv, err := NewServer(ds, l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cli, err := NewClient(ctxLong(t), dc, srv.Accept, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, srv
}

func ctxLong(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return ctx
}

func TestPutGetDelete(t *testing.T) {
	cli, _ := setup(t, Layout{Buckets: 1, Hood: 3, ValMax: 64})
	ctx := ctxLong(t)
	buf := make([]byte, 64)
	if _, err := cli.Get(ctx, []byte("a"), buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	for i, k := range []string{"a", "b", "c"} {
		if err := cli.Put(ctx, []byte(k), bytes.Repeat([]byte(k), i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// One bucket with a neighbourhood of three: the fourth key has no room.
	if err := cli.Put(ctx, []byte("d"), nil); !errors.Is(err, ErrFull) {
		t.Fatalf("put into a full neighbourhood: %v", err)
	}
	if err := cli.Put(ctx, []byte("b"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "a", "b": "new", "c": "ccc"} {
		if n, err := cli.Get(ctx, []byte(k), buf); err != nil || string(buf[:n]) != want {
			t.Fatalf("get %s: %q %v", k, buf[:n], err)
		}
	}
	if err := cli.Delete(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, []byte("a"), buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a deleted key: %v", err)
	}
	if err := cli.Delete(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if err := cli.Put(ctx, []byte("d"), []byte("room again")); err != nil {
		t.Fatal(err)
	}
	if err := cli.Put(ctx, bytes.Repeat([]byte("k"), KeyMax+1), nil); !errors.Is(err, ErrBadKey) {
		t.Fatalf("long key: %v", err)
	}
	if n, err := cli.Get(ctx, []byte("c"), buf[:2]); !errors.Is(err, rpc.ErrShortBuffer) || n != 2 {
		t.Fatalf("short buffer: %d %v", n, err)
	}
}

// TestMidWriteEntryRetried holds an entry's version odd, as a writer does
// mid-update, and checks that Get retries until the write ends and then
// returns the new value, never the half-written one.
func TestMidWriteEntryRetried(t *testing.T) {
	cli, srv := setup(t, Layout{Buckets: 1, Hood: 1, ValMax: 64})
	ctx := ctxLong(t)
	if err := cli.Put(ctx, []byte("k"), []byte("old value")); err != nil {
		t.Fatal(err)
	}
	// No RPC is in flight, so the test may act as the server's writer.
	e := srv.entry(0)
	v := e.beginWrite()
	copy(e[entryHead:], "half-written")
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := cli.Get(ctx, []byte("k"), buf)
		got <- fmt.Sprintf("%s %v", buf[:n], err)
	}()
	for cli.Retries() < 3 {
		if ctx.Err() != nil {
			t.Fatal("Get never retried")
		}
		time.Sleep(time.Millisecond)
	}
	e.endWrite(v, []byte("k"), []byte("new value"))
	if s := <-got; s != "new value <nil>" {
		t.Fatalf("get: %s", s)
	}
}

// TestCorruptEntryRejected flips a value byte behind the seqlock's back (a
// torn copy looks the same to the reader): the CRC rejects it until the
// deadline, and a good entry reads again.
func TestCorruptEntryRejected(t *testing.T) {
	cli, srv := setup(t, Layout{Buckets: 1, Hood: 1, ValMax: 64})
	ctx := ctxLong(t)
	if err := cli.Put(ctx, []byte("k"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	e := srv.entry(0)
	e[entryHead] ^= 1
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	buf := make([]byte, 64)
	if n, err := cli.Get(short, []byte("k"), buf); !errors.Is(err, ErrTorn) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get of a corrupt entry: %q %v", buf[:n], err)
	}
	e[entryHead] ^= 1
	if n, err := cli.Get(ctx, []byte("k"), buf); err != nil || string(buf[:n]) != "value" {
		t.Fatalf("get: %q %v", buf[:n], err)
	}
}

// value is what writer puts for key k at sequence seq: a length that
// changes with seq and every 8-byte word the same, so a value stitched
// from two writes shows.
func value(k, seq int, buf []byte) []byte {
	n := 8 * (1 + (k+seq)%16)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint32(buf[i:], uint32(k))
		binary.LittleEndian.PutUint32(buf[i+4:], uint32(seq))
	}
	return buf[:n]
}

// TestConcurrentNoTornValue races writers (RPCs, applied on the server's
// RPC goroutine) against readers (READs, served by the server's engine
// goroutine) over a few hot keys: every value a reader gets is one a writer
// wrote whole, and a reader never sees a key go back in time.
func TestConcurrentNoTornValue(t *testing.T) {
	cli, _ := setup(t, Layout{Buckets: 4, Hood: 4, ValMax: 128})
	ctx := ctxLong(t)
	const keys, writes, readers = 4, 1500, 4
	key := func(k int) []byte { return fmt.Appendf(nil, "hot-%d", k) }
	buf := make([]byte, 128)
	for k := range keys {
		if err := cli.Put(ctx, key(k), value(k, 0, buf)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, keys+readers)
	done := make(chan struct{})
	for k := range keys { // one writer per key: its sequence only grows
		wg.Go(func() {
			buf := make([]byte, 128)
			for seq := 1; seq <= writes; seq++ {
				if err := cli.Put(ctx, key(k), value(k, seq, buf)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var rg sync.WaitGroup
	gets := make([]int, readers)
	for r := range readers {
		rg.Go(func() {
			buf := make([]byte, 128)
			last := make([]int, keys)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := (i + r) % keys
				n, err := cli.Get(ctx, key(k), buf)
				if err != nil {
					errs <- err
					return
				}
				seq := int(binary.LittleEndian.Uint32(buf[4:]))
				if n == 0 || !bytes.Equal(buf[:n], value(k, seq, make([]byte, 128))) {
					errs <- fmt.Errorf("reader %d: torn value for key %d: % x", r, k, buf[:n])
					return
				}
				if seq < last[k] {
					errs <- fmt.Errorf("reader %d: key %d went from %d back to %d", r, k, last[k], seq)
					return
				}
				last[k] = seq
				gets[r]++
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d puts, gets %v, %d READs retried", keys*writes, gets, cli.Retries())
}

// TestRun runs the example program briefly, serving -metrics on a free
// port.
func TestRun(t *testing.T) {
	if err := run(0, 50, 200*time.Millisecond, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
}
