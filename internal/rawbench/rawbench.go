package rawbench

import (
	"errors"
	"io"
	"slices"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/stats"
)

// Config says what to measure; a zero Iters skips the ping-pong and a zero
// Blast skips the blast.
type Config struct {
	// Iters is the number of timed round trips (after Warm untimed ones).
	Iters int
	// Warm is the least number of untimed round trips first (default
	// 200); they also last at least WarmFor.
	Warm int
	// Blast is how long the measured blast lasts (after a warm-up of a
	// fifth of it).
	Blast time.Duration
	// Log, when set, receives the kernel's drop counters after each blast.
	Log io.Writer
	// Poller makes the AF_XDP ends sleep in the Go runtime's poller
	// between frames, as a started afxdp device with WaitPoll does,
	// instead of busy polling: the floor of a service that sleeps
	// between messages rather than spending a core on each end.
	Poller bool
	// HoldACK makes each end of the RC-shaped floor (XDPRC) hold the ACK
	// of the peer's message until its own next message and send both in
	// one transmit, as a QP with verbs.QPInit.AckDelay does (a stream's),
	// instead of acknowledging at once as rxe does (perftest's write_lat).
	HoldACK bool
}

func (c Config) warm() int {
	if c.Warm == 0 {
		return 200
	}
	return c.Warm
}

// WarmFor is the least time a ping-pong's untimed round trips take. On a
// virtual machine the first tens of milliseconds of a ping-pong after its
// processors idled can run at half speed or worse (2 vCPUs under KVM: the
// first 1 000 timed round trips of the RC floor after 200 untimed ones,
// 32 µs each, then 13 µs from the next 1 000 on), so a count alone does
// not warm it.
const WarmFor = 100 * time.Millisecond

// warmUp runs the untimed round trips: pingPong on batches of c.warm()
// until WarmFor has passed.
func (c Config) warmUp(pingPong func(rtt []time.Duration) error) error {
	rtt := make([]time.Duration, c.warm())
	for start := time.Now(); ; {
		if err := pingPong(rtt); err != nil {
			return err
		}
		if time.Since(start) >= WarmFor {
			return nil
		}
	}
}

// Result is one measurement. Without a ping-pong the round trips are zero;
// without a blast the rates are.
type Result struct {
	Min, P50, P99 time.Duration
	PPS, Gbps     float64
	// Loss is the share of the packets sent in the measured blast that
	// the receiver never got: a receiver starved of CPU while the sender
	// runs shows here, not as a slow link.
	Loss float64
}

// Median returns the result of median round trip (min, p50, p99 from the
// same run) with the rates of the run of median packet rate.
func Median(rs []Result) Result {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Result) int { return int(a.P50 - b.P50) })
	m := rs[len(rs)/2]
	slices.SortFunc(rs, func(a, b Result) int {
		switch {
		case a.PPS < b.PPS:
			return -1
		case a.PPS > b.PPS:
			return 1
		}
		return 0
	})
	t := rs[len(rs)/2]
	m.PPS, m.Gbps, m.Loss = t.PPS, t.Gbps, t.Loss
	return m
}

// Ratios pairs each measured round with the floor's round run just before
// it and returns the medians of the per-pair ratios: median RTT over the
// floor's, and packet rate over the floor's. On a shared virtual machine
// the host's placement of the two vCPUs switches the whole path between
// two speeds (median round trips about 3 and 4.5 µs for the AF_XDP floor
// here), and it holds for many rounds at a time; a pair run back to back
// is measured in one of them, where medians taken apart may compare a
// fast floor with a slow link, or the reverse.
func Ratios(floor, meas []Result) (rtt, tp float64) {
	n := min(len(floor), len(meas))
	rs, ts := make([]float64, 0, n), make([]float64, 0, n)
	for i := range n {
		if floor[i].P50 > 0 {
			rs = append(rs, float64(meas[i].P50)/float64(floor[i].P50))
		}
		if floor[i].PPS > 0 {
			ts = append(ts, meas[i].PPS/floor[i].PPS)
		}
	}
	return stats.Median(rs), stats.Median(ts)
}

// Percentiles sorts rtt and returns its min, median and 99th percentile.
func Percentiles(rtt []time.Duration) (min, p50, p99 time.Duration) {
	slices.Sort(rtt)
	return rtt[0], rtt[len(rtt)/2], rtt[len(rtt)*99/100]
}

// Loss is the share of sent that was not received (packets in flight at
// the window's edges make it a little noisy around zero).
func Loss(sent, got uint64) float64 {
	if sent == 0 || got >= sent {
		return 0
	}
	return float64(sent-got) / float64(sent)
}

// wireLen is the UDP payload of a RoCE packet with size payload bytes and
// no extension headers: BTH and ICRC around it.
func wireLen(size int) int { return size + bth.BTHLen + bth.ICRCLen }

// ErrNoReply is returned when no round trip of a ping-pong completed.
var ErrNoReply = errors.New("no round trip completed")
