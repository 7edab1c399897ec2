package verbs

import (
	"sync/atomic"
	"time"
)

// A CQ.Wait on a started device first spins (polls the CQ's ring, yielding
// the processor between looks) and then parks on the CQ's channel until the
// device's goroutine delivers. Parking costs a wake-up, tens of µs on a
// loaded machine (a futex wake and the scheduler); spinning costs the core
// for as long as it lasts. So a Wait spins only while recent Waits on the
// same CQ ended soon (within spinWindow), and then about twice as long as
// they took: spinLimit learns both. A CQ whose completions follow each post
// within µs is answered without a wake-up; one that waits for a client's
// next request parks at once and costs no CPU (TestIdleCPU).

// A Wait that ended within spinWindow is a hit. The window is wider than
// the longest spin so that a CQ whose Waits are slow because each of them
// parked (a round trip of parked hops, about 60 µs on loopback UDP on a
// loaded 2-core machine) still counts as busy and spins; at 10 000 calls a
// second (100 µs apart) a Wait for the next call parks.
const (
	spinWindow = 75 * time.Microsecond
	maxSpin    = 50 * time.Microsecond
)

// minSpin is added to every spin that happens at all, so that a Wait whose
// answer came in a µs does not shrink the next spin to nothing.
const minSpin = 2 * time.Microsecond

// spinLimit is what recent Waits took. Its fields are updated with plain
// loads and stores: concurrent waiters may lose a sample, which only makes
// the estimate a little older.
type spinLimit struct {
	// took is a moving average (weight 1/4) of the Waits that ended
	// within spinWindow, in ns.
	took atomic.Int64
	// hits is a moving average (weight 1/4) of whether a Wait ended
	// within spinWindow, scaled to 0..hitScale.
	hits atomic.Int64
}

const hitScale = 1024

// record tells the limit how long a Wait took until a completion came,
// whether it spun or parked meanwhile.
func (s *spinLimit) record(d time.Duration) {
	h := s.hits.Load()
	if d > spinWindow {
		s.hits.Store(h - h/4)
		return
	}
	t := s.took.Load()
	s.took.Store(t + (int64(d)-t)/4)
	s.hits.Store(h + (hitScale-h)/4)
}

// budget is how long the next Wait should spin before it parks: none when
// fewer than half of the recent Waits ended within spinWindow, else twice
// what they took, at most maxSpin.
func (s *spinLimit) budget() time.Duration {
	if s.hits.Load() < hitScale/2 {
		return 0
	}
	return min(2*time.Duration(s.took.Load())+minSpin, maxSpin)
}
