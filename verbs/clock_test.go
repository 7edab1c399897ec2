package verbs

import (
	"strings"
	"testing"
	"time"
)

// TestMonoNow checks the devices' default clock: it never goes back, it
// carries a monotonic reading, and it advances as time.Now does.
func TestMonoNow(t *testing.T) {
	prev := monoNow()
	for range 1000 {
		now := monoNow()
		if now.Before(prev) {
			t.Fatalf("monoNow went back: %v after %v", now, prev)
		}
		prev = now
	}
	if s := prev.String(); !strings.Contains(s, " m=") {
		t.Fatalf("monoNow has no monotonic reading: %s", s)
	}
	a, wa := monoNow(), time.Now()
	time.Sleep(20 * time.Millisecond)
	b, wb := monoNow(), time.Now()
	if got, want := b.Sub(a), wb.Sub(wa); got-want < -5*time.Millisecond || got-want > 5*time.Millisecond {
		t.Fatalf("monoNow advanced %v while time.Now advanced %v", got, want)
	}
	if d := time.Since(b); d < 0 || d > time.Second {
		t.Fatalf("time.Since(monoNow()) = %v", d)
	}
}
