package waiter

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newT(t *testing.T) (*Waiter, [2]int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	w, err := New(p[0])
	if err != nil {
		t.Fatal(err)
	}
	if w.ep == nil {
		t.Fatal("the epoll instance is not in the runtime's poller")
	}
	if ppoll {
		w.ep.Close()
		w.ep = nil
	}
	return w, p
}

// ppoll makes newT's Waiters use the ppoll(2) fallback.
var ppoll bool

// TestPpollFallback runs the Wait, Wake and Close tests on a Waiter that
// waits in ppoll(2), as one does when the runtime's poller refuses its
// epoll instance.
func TestPpollFallback(t *testing.T) {
	ppoll = true
	defer func() { ppoll = false }()
	for name, f := range map[string]func(*testing.T){
		"WaitReadable": TestWaitReadable, "CloseEndsWait": TestCloseEndsWait,
		"CloseFencesOwner": TestCloseFencesOwner, "WakeEndsOneWait": TestWakeEndsOneWait,
		"WakeDuringClose": TestWakeDuringClose, "WaitTimeout": TestWaitTimeout,
		"CloseEndsPollOut": TestCloseEndsPollOut,
	} {
		t.Run(name, f)
	}
}

// TestWaitTimeout: a Wait with nothing to read returns after its timeout,
// not before, and a Wake before it is spent by that Wait alone.
func TestWaitTimeout(t *testing.T) {
	w, _ := newT(t)
	defer w.Close(w.Free)
	const d = 20 * time.Millisecond
	start := time.Now()
	if closed, err := w.Wait(d); closed || err != nil {
		t.Fatalf("Wait: %v %v", closed, err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("Wait(%v) returned after %v", d, took)
	}
	w.Wake()
	start = time.Now()
	if closed, err := w.Wait(time.Minute); closed || err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("Wait after a Wake: %v %v after %v", closed, err, time.Since(start))
	}
	start = time.Now()
	if closed, err := w.Wait(d); closed || err != nil || time.Since(start) < d {
		t.Fatalf("second Wait after one Wake: %v %v after %v", closed, err, time.Since(start))
	}
}

func TestWaitReadable(t *testing.T) {
	w, p := newT(t)
	defer w.Close(w.Free)
	if closed, err := w.Wait(0); closed || err != nil {
		t.Fatalf("idle Wait(0): %v %v", closed, err)
	}
	unix.Write(p[1], []byte{1})
	// Readable now, so even an unbounded wait returns at once.
	if closed, err := w.Wait(-1); closed || err != nil {
		t.Fatalf("Wait: %v %v", closed, err)
	}
}

// TestCloseEndsWait: Close from another goroutine wakes an owner sleeping
// in Wait, and frees only after the owner has left its call.
func TestCloseEndsWait(t *testing.T) {
	w, _ := newT(t)
	var out atomic.Bool // the owner has left its call
	entered := make(chan struct{})
	res := make(chan bool)
	go func() {
		if !w.Enter() {
			res <- false
			return
		}
		close(entered)
		closed, _ := w.Wait(-1)
		out.Store(true)
		w.Exit()
		res <- closed
	}()
	<-entered
	freed := false
	w.Close(func() {
		if !out.Load() {
			t.Error("free ran while the owner was inside its call")
		}
		freed = true
		w.Free()
	})
	if !freed {
		t.Fatal("Close returned before free ran")
	}
	if !<-res {
		t.Fatal("Wait did not report the close")
	}
	if w.Enter() {
		t.Fatal("Enter succeeded after Close")
	}
}

// TestCloseFencesOwner hammers Enter/Exit from an owner while another
// goroutine closes: under the race detector, free's write must be ordered
// after every access the owner made inside a call, and no call may start
// after it.
func TestCloseFencesOwner(t *testing.T) {
	for range 50 {
		w, _ := newT(t)
		res := 0 // the owner's resource, freed by Close
		var wg sync.WaitGroup
		started := make(chan struct{})
		wg.Go(func() {
			close(started)
			for w.Enter() {
				res++
				w.Exit()
			}
		})
		<-started
		w.Close(func() { res = -1; w.Free() })
		wg.Wait()
		if res != -1 {
			t.Fatalf("owner touched the resource after free: %d", res)
		}
	}
}

// TestCloseTwice: every Close returns after free has run, once.
func TestCloseTwice(t *testing.T) {
	w, _ := newT(t)
	var n atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			w.Close(func() { time.Sleep(time.Millisecond); n.Add(1); w.Free() })
			if n.Load() != 1 {
				t.Error("Close returned before free ran")
			}
		})
	}
	wg.Wait()
	if n.Load() != 1 {
		t.Fatalf("free ran %d times", n.Load())
	}
}

func TestConcurrentUsePanics(t *testing.T) {
	w, _ := newT(t)
	defer w.Close(w.Free)
	w.Enter()
	defer w.Exit()
	defer func() {
		if recover() == nil {
			t.Fatal("second Enter did not panic")
		}
	}()
	w.Enter()
}

// BenchmarkEnterExit is the cost the fence adds to every data-path call;
// BenchmarkRWMutex is what a read-held RWMutex cost instead.
func BenchmarkEnterExit(b *testing.B) {
	var w Waiter
	b.ReportAllocs()
	for b.Loop() {
		if w.Enter() {
			w.Exit()
		}
	}
}

func BenchmarkRWMutex(b *testing.B) {
	var mu sync.RWMutex
	closed := false
	b.ReportAllocs()
	for b.Loop() {
		mu.RLock()
		if !closed {
			mu.RUnlock()
		}
	}
}

// TestWakeEndsOneWait: a Wake from another goroutine ends a Wait that
// would sleep forever, without reporting a close, and ends only that one.
func TestWakeEndsOneWait(t *testing.T) {
	w, _ := newT(t)
	defer w.Close(w.Free)
	go w.Wake()
	if closed, err := w.Wait(-1); closed || err != nil {
		t.Fatalf("woken Wait: %v %v", closed, err)
	}
	if closed, err := w.Wait(0); closed || err != nil {
		t.Fatalf("Wait(0) after the wake was used: %v %v", closed, err)
	}
	w.Wake()
	w.Wake()
	if closed, err := w.Wait(-1); closed || err != nil {
		t.Fatalf("Wait after two Wakes: %v %v", closed, err)
	}
}

// TestWakeDuringClose: Wakes from other goroutines race Close. None may
// write to the eventfd once Free has closed it: the process reuses the
// number at once, here for a pipe, whose reader would get the Wake's
// eight bytes.
func TestWakeDuringClose(t *testing.T) {
	for range 50 {
		w, _ := newT(t)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						w.Wake()
					}
				}
			})
		}
		var p [2]int
		w.Close(func() {
			w.Free()
			// The eventfd's number, free now, goes to this pipe.
			if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(100 * time.Microsecond)
		close(stop)
		wg.Wait()
		var buf [64]byte
		n, _ := unix.Read(p[0], buf[:])
		unix.Close(p[0])
		unix.Close(p[1])
		if n > 0 {
			t.Fatalf("%d bytes of Wakes written after Free, into the descriptor's next owner", n)
		}
	}
}

// TestCloseEndsPollOut: Close cuts short an owner waiting in PollOut for
// room on a full descriptor, rather than leave it to PollOut's own bound.
func TestCloseEndsPollOut(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	w, err := New(p[1]) // the write end: PollOut watches it
	if err != nil {
		t.Fatal(err)
	}
	if ppoll {
		w.ep.Close()
		w.ep = nil
	}
	for { // fill the pipe
		if _, err := unix.Write(p[1], make([]byte, 4096)); err != nil {
			break
		}
	}
	entered := make(chan struct{})
	res := make(chan time.Duration, 1)
	go func() {
		if !w.Enter() {
			return
		}
		close(entered)
		start := time.Now()
		w.PollOut(time.Minute)
		res <- time.Since(start)
		w.Exit()
	}()
	<-entered
	time.Sleep(20 * time.Millisecond) // let it reach ppoll
	w.Close(w.Free)
	if d := <-res; d > 10*time.Second {
		t.Fatalf("PollOut returned %v after Close", d)
	}
}

// TestIdleOwnerLeavesEpoll: a Wait puts the descriptors in the epoll
// instance and they stay for the next Wait; after idleCalls calls of the
// owner without a Wait they are out (a busy-polling owner then pays no
// epoll callback per packet), and the next Wait puts them back and still
// sees a readable descriptor.
func TestIdleOwnerLeavesEpoll(t *testing.T) {
	w, p := newT(t)
	defer w.Close(w.Free)
	call := func() {
		if !w.Enter() {
			t.Fatal("Enter on an open Waiter")
		}
		w.Exit()
	}
	if w.joined {
		t.Fatal("descriptors in the instance before any Wait")
	}
	if closed, err := w.Wait(0); closed || err != nil {
		t.Fatalf("Wait: %v %v", closed, err)
	}
	for range idleCalls {
		call()
	}
	if !w.joined {
		t.Fatalf("descriptors out after %d calls, want in", idleCalls)
	}
	call()
	if w.joined {
		t.Fatalf("descriptors in after %d calls without a Wait, want out", idleCalls+1)
	}
	unix.Write(p[1], []byte{1})
	done := make(chan error, 1)
	go func() { _, err := w.Wait(10 * time.Second); done <- err }()
	select {
	case err := <-done:
		if err != nil || !w.joined {
			t.Fatalf("Wait on a readable descriptor: %v, joined %v", err, w.joined)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not see the readable descriptor")
	}
}

// TestProbe: a Wait in the runtime's poller asks the probe, not the epoll
// instance, before it parks (input the probe sees ends it at once, input
// the descriptors show but the probe does not is left to the poller), and
// a descriptor that becomes readable while it is parked still ends it.
func TestProbe(t *testing.T) {
	w, p := newT(t)
	defer w.Close(w.Free)
	var waiting atomic.Bool
	w.SetProbe(func() bool { return waiting.Load() })
	const long = 5 * time.Second
	waiting.Store(true)
	w.Enter()
	start := time.Now()
	if closed, err := w.Wait(long); closed || err != nil || time.Since(start) > long/2 {
		t.Fatalf("Wait with the probe saying yes: %v %v after %v", closed, err, time.Since(start))
	}
	waiting.Store(false)
	// Nothing waiting: the Wait times out, having parked.
	start = time.Now()
	if closed, err := w.Wait(20 * time.Millisecond); closed || err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("idle Wait: %v %v after %v", closed, err, time.Since(start))
	}
	// A byte written while the Wait is parked ends it.
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(p[1], []byte{1})
	}()
	start = time.Now()
	if closed, err := w.Wait(long); closed || err != nil || time.Since(start) > long/2 {
		t.Fatalf("Wait for a write: %v %v after %v", closed, err, time.Since(start))
	}
	w.Exit()
}
