package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/rpc"
	"github.com/uroce/uroce/verbs"
)

// long bounds waits that only detect a hang; nothing is timed against it.
const long = 30 * time.Second

const (
	mEcho uint16 = iota + 1
	mFail
	mBlock
)

// setup connects a client on loopback.A to a server on loopback.B whose
// handler echoes, fails, or blocks on release.
func setup(t testing.TB, cfg rpc.Config, release <-chan struct{}) (*rpc.Client, *rpc.Server) {
	return setupEntered(t, cfg, release, nil)
}

// setupEntered is setup whose blocking handler first sends on entered, if
// not nil.
func setupEntered(t testing.TB, cfg rpc.Config, release <-chan struct{}, entered chan<- struct{}) (*rpc.Client, *rpc.Server) {
	t.Helper()
	da, db, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { da.Close(); db.Close() })
	srv := rpc.NewServer(db, cfg, func(method uint16, req, resp []byte) (int, uint16) {
		switch method {
		case mEcho:
			return copy(resp, req), 0
		case mBlock:
			if entered != nil {
				entered <- struct{}{}
			}
			<-release
			return copy(resp, req), 0
		}
		return 0, 42
	})
	t.Cleanup(func() { srv.Close() })
	cli, err := rpc.NewClient(da, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ep, err := srv.Accept(cli.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Connect(ep); err != nil {
		t.Fatal(err)
	}
	return cli, srv
}

func ctxLong(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return ctx
}

func TestCallSizes(t *testing.T) {
	cli, _ := setup(t, rpc.Config{Slots: 8, MaxMsg: 16 << 10}, nil)
	ctx := ctxLong(t)
	for _, size := range []int{0, 1, 64, 1024, 4096, 4097, 16 << 10} {
		req := bytes.Repeat([]byte{byte(size)}, size)
		resp := make([]byte, 16<<10)
		n, err := cli.Call(ctx, mEcho, req, resp)
		if err != nil || !bytes.Equal(resp[:n], req) {
			t.Fatalf("size %d: n %d err %v", size, n, err)
		}
	}
	if _, err := cli.Call(ctx, mEcho, make([]byte, 16<<10+1), nil); !errors.Is(err, rpc.ErrTooLarge) {
		t.Fatalf("oversized request: %v", err)
	}
	short := make([]byte, 3)
	if n, err := cli.Call(ctx, mEcho, []byte("hello"), short); !errors.Is(err, rpc.ErrShortBuffer) || n != 3 || string(short) != "hel" {
		t.Fatalf("short buffer: %d %v %q", n, err, short)
	}
	var st rpc.StatusError
	if _, err := cli.Call(ctx, mFail, nil, nil); !errors.As(err, &st) || st != 42 {
		t.Fatalf("status: %v", err)
	}
}

// TestManyOutstanding runs more callers than slots, each checking that it
// gets its own reply back: request IDs route replies to the right caller.
func TestManyOutstanding(t *testing.T) {
	cli, _ := setup(t, rpc.Config{Slots: 16, MaxMsg: 1024}, nil)
	ctx := ctxLong(t)
	const callers, calls = 48, 100
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			resp := make([]byte, 1024)
			for k := range calls {
				req := fmt.Appendf(nil, "caller %d call %d %s", g, k, bytes.Repeat([]byte{'x'}, (g*k)%900))
				n, err := cli.Call(ctx, mEcho, req, resp)
				if err != nil || !bytes.Equal(resp[:n], req) {
					errs <- fmt.Errorf("caller %d call %d: %q, %v", g, k, resp[:n], err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := cli.Stats(); s.Calls != callers*calls || s.Late != 0 || s.Stray != 0 || s.Expired != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDeadline lets a request expire while the server holds it, then
// checks that the late reply is dropped and its slot and buffer serve the
// next request (there is only one slot).
func TestDeadline(t *testing.T) {
	release := make(chan struct{})
	cli, _ := setup(t, rpc.Config{Slots: 1, MaxMsg: 64}, release)
	resp := []byte("untouched")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := cli.Call(ctx, mBlock, []byte("late reply"), resp); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired call: %v", err)
	}
	if s := cli.Stats(); s.Expired != 1 {
		t.Fatalf("stats %+v", s)
	}
	// The only slot is taken until the late reply comes: a call meanwhile
	// waits for it, and gives up with its context.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := cli.Call(ctx2, mEcho, []byte("x"), resp); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call without a free slot: %v", err)
	}
	close(release)
	n, err := cli.Call(ctxLong(t), mEcho, []byte("next"), resp)
	if err != nil || string(resp[:n]) != "next" {
		t.Fatalf("call after the late reply: %q %v", resp[:n], err)
	}
	if string(resp[n:]) != "untouched"[n:] {
		t.Fatalf("the late reply wrote the caller's buffer: %q", resp)
	}
	if s := cli.Stats(); s.Late != 1 || s.Expired != 1 || s.Stray != 0 || s.Calls != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRead(t *testing.T) {
	cli, srv := setup(t, rpc.Config{Slots: 4, MaxMsg: 8192}, nil)
	buf := bytes.Repeat([]byte("0123456789abcdef"), 1024)
	mr, err := srv.PD().RegMR(buf, verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxLong(t)
	dst := make([]byte, 5000)
	if err := cli.Read(ctx, dst, mr.Addr()+3, mr.RKey()); err != nil || !bytes.Equal(dst, buf[3:5003]) {
		t.Fatalf("read: %v", err)
	}
	// A bad key breaks the connection, as it does on an RNIC.
	if err := cli.Read(ctx, dst, mr.Addr(), mr.RKey()+1); !errors.Is(err, rpc.ErrBroken) {
		t.Fatalf("bad rkey: %v", err)
	}
	if _, err := cli.Call(ctx, mEcho, nil, nil); !errors.Is(err, rpc.ErrBroken) {
		t.Fatalf("call on a broken connection: %v", err)
	}
}

// BenchmarkCall is one caller's round trip of a 512-byte echo; its
// allocations are process-wide (both engines, both goroutines).
func BenchmarkCall(b *testing.B) {
	cli, _ := setup(b, rpc.Config{Slots: 4, MaxMsg: 1024}, nil)
	ctx := context.Background()
	req, resp := make([]byte, 512), make([]byte, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cli.Call(ctx, mEcho, req, resp); err != nil {
			b.Fatal(err)
		}
	}
}

// TestManyClients connects several clients, sharing one device, to one
// server: each connection's replies go to its own client.
func TestManyClients(t *testing.T) {
	da, db, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { da.Close(); db.Close() })
	cfg := rpc.Config{Slots: 8, MaxMsg: 256, MaxConns: 3}
	srv := rpc.NewServer(db, cfg, func(_ uint16, req, resp []byte) (int, uint16) { return copy(resp, req), 0 })
	t.Cleanup(func() { srv.Close() })
	var clients []*rpc.Client
	for range 3 {
		cli, err := rpc.NewClient(da, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		ep, err := srv.Accept(cli.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.Connect(ep); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cli)
	}
	extra, err := rpc.NewClient(da, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { extra.Close() })
	if _, err := srv.Accept(extra.Endpoint()); !errors.Is(err, rpc.ErrTooManyConns) {
		t.Fatalf("fourth connection: %v", err)
	}
	ctx := ctxLong(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3*4)
	for c, cli := range clients {
		for g := range 4 {
			wg.Go(func() {
				resp := make([]byte, 256)
				for k := range 100 {
					req := fmt.Appendf(nil, "client %d goroutine %d call %d", c, g, k)
					n, err := cli.Call(ctx, mEcho, req, resp)
					if err != nil || !bytes.Equal(resp[:n], req) {
						errs <- fmt.Errorf("%s: %q %v", req, resp[:n], err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCloseWhileWaiting closes a client while its only caller waits for a
// reply the server holds (that caller holds the poll token, asleep in the
// CQ): the call ends with ErrClosed and Close returns.
func TestCloseWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cli, _ := setup(t, rpc.Config{Slots: 2, MaxMsg: 64}, release)
	got := make(chan error, 1)
	go func() {
		_, err := cli.Call(context.Background(), mBlock, nil, nil)
		got <- err
	}()
	for cli.Stats().Calls == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, rpc.ErrClosed) {
			t.Fatalf("call: %v", err)
		}
	case <-time.After(long):
		t.Fatal("call still waiting after Close")
	}
	if _, err := cli.Call(context.Background(), mEcho, nil, nil); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

// BenchmarkCallParallel is 8×GOMAXPROCS callers sharing one client.
func BenchmarkCallParallel(b *testing.B) {
	cli, _ := setup(b, rpc.Config{Slots: 64, MaxMsg: 1024}, nil)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := make([]byte, 64), make([]byte, 1024)
		for pb.Next() {
			if _, err := cli.Call(context.Background(), mEcho, req, resp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestReadDeadline lets a READ expire while the server's engine is stalled
// (in inline mode only the server's goroutine drives it, and a handler
// holds that goroutine): the late READ completion must be dropped without
// touching the caller's buffer, and its slot must serve again.
func TestReadDeadline(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	cli, srv := setupEntered(t, rpc.Config{Slots: 2, MaxMsg: 64}, release, entered)
	src := []byte("remote bytes")
	mr, err := srv.PD().RegMR(src, verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxLong(t)
	blocked := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctx, mBlock, nil, nil)
		blocked <- err
	}()
	<-entered // the server's goroutine is held: nothing drives its engine
	dst := []byte("local bytes!")
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := cli.Read(short, dst, mr.Addr(), mr.RKey()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read from a stalled server: %v", err)
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for cli.Stats().Late == 0 {
		if ctx.Err() != nil {
			t.Fatal("the late READ never completed")
		}
		time.Sleep(time.Millisecond)
	}
	if string(dst) != "local bytes!" {
		t.Fatalf("the late READ wrote the caller's buffer: %q", dst)
	}
	got := make([]byte, len(src))
	if err := cli.Read(ctx, got, mr.Addr(), mr.RKey()); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("read after the late one: %q %v", got, err)
	}
}
