package udp_test

import (
	"testing"
	"time"
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
