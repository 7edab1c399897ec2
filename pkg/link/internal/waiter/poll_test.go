package waiter

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollReadable: Poll asks ready first, parks while it says no, and is
// woken by input on a descriptor.
func TestPollReadable(t *testing.T) {
	w, p := newT(t)
	w.InitPoll()
	defer w.Close(w.Free)
	if !w.CanPoll() {
		t.Skip("no poller on this runtime")
	}
	calls := 0
	if closed, err := w.Poll(func() bool { calls++; return true }); closed || err != nil || calls != 1 {
		t.Fatalf("Poll with ready: %v %v, %d calls", closed, err, calls)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		unix.Write(p[1], []byte{1})
	}()
	var buf [1]byte
	got := false
	closed, err := w.Poll(func() bool {
		n, _ := unix.Read(p[0], buf[:])
		got = n == 1
		return got
	})
	if closed || err != nil || !got {
		t.Fatalf("Poll: %v %v, read %v", closed, err, got)
	}
}

// TestPollDeadline: Poll ends at the deadline PollDeadline set, and at one
// another goroutine sets meanwhile, without an error.
func TestPollDeadline(t *testing.T) {
	w, _ := newT(t)
	w.InitPoll()
	defer w.Close(w.Free)
	if !w.CanPoll() {
		t.Skip("no poller on this runtime")
	}
	no := func() bool { return false }
	start := time.Now()
	w.PollDeadline(start.Add(20 * time.Millisecond))
	if closed, err := w.Poll(no); closed || err != nil {
		t.Fatalf("Poll: %v %v", closed, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Poll returned after %v, before its deadline", d)
	}
	// The expired deadline cleared, Poll sleeps until another goroutine
	// sets one.
	w.PollDeadline(time.Time{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		w.PollDeadline(time.Now())
	}()
	start = time.Now()
	if closed, err := w.Poll(no); closed || err != nil {
		t.Fatalf("Poll with a deadline set meanwhile: %v %v", closed, err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Fatalf("Poll returned after %v, before the deadline was set", d)
	}
}

// TestPollWake: a Wake has Poll ask ready again.
func TestPollWake(t *testing.T) {
	w, _ := newT(t)
	w.InitPoll()
	defer w.Close(w.Free)
	if !w.CanPoll() {
		t.Skip("no poller on this runtime")
	}
	calls := 0
	go func() {
		time.Sleep(10 * time.Millisecond)
		w.Wake()
	}()
	if closed, err := w.Poll(func() bool { calls++; return calls > 1 }); closed || err != nil || calls != 2 {
		t.Fatalf("Poll: %v %v, %d calls", closed, err, calls)
	}
}

// TestCloseEndsPoll: Close from another goroutine ends a Poll in progress,
// which reports it, and a Poll after Close returns at once.
func TestCloseEndsPoll(t *testing.T) {
	w, _ := newT(t)
	w.InitPoll()
	if !w.CanPoll() {
		w.Close(w.Free)
		t.Skip("no poller on this runtime")
	}
	res := make(chan bool)
	go func() {
		closed, _ := w.Poll(func() bool { return false })
		res <- closed
	}()
	time.Sleep(10 * time.Millisecond)
	w.Close(w.Free)
	select {
	case closed := <-res:
		if !closed {
			t.Error("Poll ended by Close did not say closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end Poll")
	}
	if closed, _ := w.Poll(func() bool { return false }); !closed {
		t.Error("Poll after Close did not say closed")
	}
}
