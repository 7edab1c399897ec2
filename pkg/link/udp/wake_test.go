package udp_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/linktest"
)

// TestWake: Wake from another goroutine ends a Wait that would sleep
// forever without closing the link, and a Wake before a Wait ends that
// Wait at once.
func TestWake(t *testing.T) {
	l := open(t, lo1, testPort+1)
	go func() {
		time.Sleep(time.Millisecond) // most likely inside Wait by now
		l.Wake()
	}()
	if err := l.Wait(-1); err != nil {
		t.Fatal(err)
	}
	l.Wake()
	if err := l.Wait(-1); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Recv(nil); n != 0 || err != nil {
		t.Fatalf("Recv after wakes: %d %v", n, err)
	}
}

// TestPoll: a goroutine asleep in Poll, which does not own the link, is
// woken by a datagram its ready then receives; and by nothing the link
// sends itself (Poll watches input only).
func TestPoll(t *testing.T) {
	a, b := open(t, lo1, testPort+7), open(t, lo2, testPort+7)
	got := make(chan int, 1)
	calls := 0
	go func() {
		pk := make([]*link.Packet, 8)
		err := b.Poll(func() bool {
			calls++
			n, _ := b.Recv(pk)
			b.Release(pk[:n])
			return n > 0
		})
		if err != nil {
			t.Error(err)
		}
		got <- calls
	}()
	time.Sleep(10 * time.Millisecond)
	pk := make([]*link.Packet, 1)
	for range 3 {
		// b sends too: its socket's room coming back must not wake it.
		b.Alloc(pk)
		linktest.Fill(pk[0], 1, 100, lo1)
		if _, err := b.Send(pk); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.Alloc(pk)
	linktest.Fill(pk[0], 1, 100, lo2)
	if _, err := a.Send(pk); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 2 {
			t.Errorf("ready called %d times, want 2 (before parking, for the datagram)", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Poll not woken by a datagram")
	}
}
