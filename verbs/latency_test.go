package verbs_test

import (
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// TestLatency: with both devices on one fake clock, a signaled WRITE
// posted at T and completed by a poll at T+7µs records exactly 7µs; an
// unsignaled one records nothing; the device's latency holds its QPs',
// destroyed ones included.
func TestLatency(t *testing.T) {
	a, b, qa, _, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	var mu sync.Mutex
	now := time.Unix(1e6, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a.SetClock(clock)
	b.SetClock(clock)
	tests := []struct {
		name  string
		flags verbs.SendFlags
		wait  time.Duration
		count uint64
	}{
		{"signaled", verbs.SendSignaled, 7 * time.Microsecond, 1},
		{"unsignaled", 0, 3 * time.Microsecond, 1},
		{"signaled slow", verbs.SendSignaled, 2 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		wr := verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Flags: tt.flags, SGL: []verbs.SGE{ma.SGE(0, 64)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}
		if err := qa.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(tt.wait)
		mu.Unlock()
		if tt.flags&verbs.SendSignaled != 0 {
			waitOne(ca, cb)
		} else {
			// Let the ACK in; no completion comes.
			for qa.Counters().CompletedSends == qa.Counters().PostedSends-1 {
				cb.Poll(nil)
				ca.Poll(nil)
			}
		}
		l := qa.Latency()
		if l.Count() != tt.count {
			t.Fatalf("%s: %d recorded, want %d", tt.name, l.Count(), tt.count)
		}
		if tt.flags&verbs.SendSignaled != 0 && l.Max() != tt.wait && l.Count() == 1 {
			t.Errorf("%s: max %v, want %v", tt.name, l.Max(), tt.wait)
		}
	}
	l := qa.Latency()
	if l.Max() != 2*time.Millisecond || l.Sum() != 2*time.Millisecond+7*time.Microsecond {
		t.Errorf("max %v sum %v", l.Max(), l.Sum())
	}
	if p50 := l.Quantile(0.5); p50 < 7*time.Microsecond*63/64 || p50 > 7*time.Microsecond*65/64 {
		t.Errorf("P50 %v, want about 7µs", p50)
	}
	if l.Quantile(1) != 2*time.Millisecond {
		t.Errorf("P100 %v", l.Quantile(1))
	}
	if d := a.Latency(); d != l {
		t.Errorf("device latency count %d, QP's %d", d.Count(), l.Count())
	}
	if qs := a.QPLatencies(nil); len(qs) != 1 || qs[0].QPN != qa.QPN() || qs[0].Latency != l {
		t.Errorf("QPLatencies: %d entries", len(qs))
	}
	if err := qa.Destroy(); err != nil {
		t.Fatal(err)
	}
	if d := a.Latency(); d != l {
		t.Errorf("after Destroy: device latency count %d, want %d", d.Count(), l.Count())
	}
	if qs := a.QPLatencies(nil); len(qs) != 0 {
		t.Errorf("QPLatencies after Destroy: %d entries", len(qs))
	}
}
