package perftest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// latTail is how many of the slowest samples perftest drops before its
// statistics (LAT_MEASURE_TAIL).
const latTail = 2

// LatencyReport is one line of a latency test's report, in microseconds.
type LatencyReport struct {
	Bytes   int     `json:"MsgSize"`
	Iters   int     `json:"n_iterations"`
	Min     float64 `json:"t_min"`
	Max     float64 `json:"t_max"`
	Typical float64 `json:"t_typical"`
	Avg     float64 `json:"t_avg"`
	Stdev   float64 `json:"t_stdev"`
	P99     float64 `json:"percentile_99"`
	P999    float64 `json:"percentile_99.9"`
}

// ErrTooFewSamples means a latency test ran too few iterations for a report.
var ErrTooFewSamples = fmt.Errorf("perftest: too few iterations for a latency report (need %d)", latTail+2)

// Latency computes a latency report as perftest's print_report_lat does
// from the times at which iterations were posted: one sample per
// consecutive pair, halved for ping-pong tests (write and send, where a
// sample is a round trip) and not for read and atomic. As perftest does,
// it sorts the samples, drops the two slowest, reports the next one as
// t_max, takes the median of the rest as t_typical (the mean of the middle
// two, in whole nanoseconds, for an even count), and computes t_stdev from
// differences truncated to whole microseconds.
func Latency(size int, posted []time.Duration, roundTrip bool) (LatencyReport, error) {
	n := len(posted) - 1
	if n-latTail < 1 {
		return LatencyReport{}, ErrTooFewSamples
	}
	delta := make([]int64, n)
	for i := range n {
		delta[i] = int64(posted[i+1] - posted[i])
	}
	q := 1000.0 // ns per µs
	if roundTrip {
		q *= 2
	}
	slices.Sort(delta)
	n -= latTail
	var median int64
	if (n-1)%2 != 0 {
		median = (delta[n/2] + delta[n/2-1]) / 2
	} else {
		median = delta[n/2]
	}
	var sum float64
	for _, d := range delta[:n] {
		sum += float64(d) / q
	}
	avg := sum / float64(n)
	var varSum float64
	for _, d := range delta[:n] {
		diff := int(avg - float64(d)/q) // perftest keeps it in an int
		varSum += float64(diff * diff)
	}
	return LatencyReport{
		Bytes: size, Iters: len(posted),
		Min: float64(delta[0]) / q, Max: float64(delta[n]) / q,
		Typical: float64(median) / q, Avg: avg, Stdev: math.Sqrt(varSum / float64(n)),
		P99:  float64(delta[int(math.Ceil(float64(n)*0.99))]) / q,
		P999: float64(delta[int(math.Ceil(float64(n)*0.999))]) / q,
	}, nil
}

// Result lines of perftest's reports.
const (
	ResultLine    = "---------------------------------------------------------------------------------------\n"
	latencyHeader = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	// perftest heads MB/sec (RESULT_FMT), and its MB is 2^20 bytes: the
	// unit is MiB, named as perftest names it.
	bandwidthHeaderMB = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	bandwidthHeaderGb = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
)

// WriteHeader prints the column titles of a latency report.
func (LatencyReport) WriteHeader(w io.Writer) error {
	_, err := io.WriteString(w, ResultLine+latencyHeader)
	return err
}

// WriteTo prints the report line as perftest's REPORT_FMT_LAT does.
func (r LatencyReport) WriteTo(w io.Writer) (int64, error) {
	n, err := fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		r.Bytes, r.Iters, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999)
	return int64(n), err
}

// BandwidthReport is one line of a bandwidth test's report.
type BandwidthReport struct {
	Bytes int     `json:"MsgSize"`
	Iters int     `json:"n_iterations"`
	Peak  float64 `json:"BW_peak"`
	Avg   float64 `json:"BW_average"`
	// MsgRate is in millions of messages per second.
	MsgRate float64 `json:"MsgRate"`
	// Gbits says Peak and Avg are in Gb/s (--report_gbits); otherwise MB/s as
	// perftest counts them, 2^20 bytes a second.
	Gbits bool `json:"-"`
}

// Bandwidth computes a bandwidth report as perftest's print_report_bw
// does, from the time each iteration was posted and completed. Peak is the
// best rate over any run of iterations from a post to a signaled
// completion (completions are signaled every cqMod, posts go in lists of
// postList); average is size × iterations over the whole test.
func Bandwidth(size int, posted, completed []time.Duration, cqMod, postList int, gbits bool) BandwidthReport {
	r := BandwidthNoPeak(size, posted, completed, gbits)
	iters := r.Iters
	if iters == 0 || len(completed) < iters {
		return r
	}
	cqMod, postList = max(cqMod, 1), max(postList, 1)
	opt := int64(completed[0] - posted[0])
	for i := 0; i < iters; i += postList {
		for j := (i+1+cqMod-1)/cqMod*cqMod - 1; j < iters; j += cqMod {
			if t := int64(completed[j]-posted[i]) / int64(j-i+1); t < opt {
				opt = t
			}
		}
		if iters%cqMod != 0 {
			j := iters - 1
			if t := int64(completed[j]-posted[i]) / int64(j-i+1); t < opt {
				opt = t
			}
		}
	}
	if opt > 0 {
		r.Peak = float64(size) * hz / (float64(opt) * bwFormat(gbits))
	}
	return r
}

// BandwidthNoPeak is Bandwidth with perftest's -N (noPeak): Peak is 0,
// and its search, quadratic in the iterations (perftest skips it too),
// is not made.
func BandwidthNoPeak(size int, posted, completed []time.Duration, gbits bool) BandwidthReport {
	iters := len(posted)
	r := BandwidthReport{Bytes: size, Iters: iters, Gbits: gbits}
	if iters == 0 || len(completed) < iters {
		return r
	}
	total := float64(completed[iters-1] - posted[0])
	if total > 0 {
		r.Avg = float64(size) * float64(iters) * hz / (total * bwFormat(gbits))
		r.MsgRate = float64(iters) * hz / (total * 1e6)
	}
	return r
}

const hz = 1e9 // timestamps are nanoseconds

// bwFormat is perftest's unit: MB/s as 2^20 bytes a second, or Gb/s.
func bwFormat(gbits bool) float64 {
	if gbits {
		return 125000000
	}
	return 0x100000
}

// WriteHeader prints the column titles of a bandwidth report.
func (r BandwidthReport) WriteHeader(w io.Writer) error {
	h := bandwidthHeaderMB
	if r.Gbits {
		h = bandwidthHeaderGb
	}
	_, err := io.WriteString(w, ResultLine+h)
	return err
}

// WriteTo prints the report line as perftest's REPORT_FMT does.
func (r BandwidthReport) WriteTo(w io.Writer) (int64, error) {
	n, err := fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f\n", r.Bytes, r.Iters, r.Peak, r.Avg, r.MsgRate)
	return int64(n), err
}

// DurationBandwidth computes the report of a bandwidth test run for a
// time, as perftest's print_report_bw does in duration mode (-D) and
// for each report of --run_infinitely: count messages in elapsed, no peak
// (perftest sets noPeak there), the iterations column the count itself.
// factor is perftest's run_inf_bi_factor: 2 for --run_infinitely with -b
// in WRITE and READ tests, whose count is one direction's, else 1.
func DurationBandwidth(size, count int, elapsed time.Duration, factor int, gbits bool) BandwidthReport {
	r := BandwidthReport{Bytes: size, Iters: count, Gbits: gbits}
	if elapsed <= 0 {
		return r
	}
	format := float64(0x100000)
	if gbits {
		format = 125000000
	}
	factor = max(factor, 1)
	const hz = 1e9 // timestamps are nanoseconds
	r.Avg = float64(factor*size) * float64(count) * hz / (float64(elapsed) * format)
	r.MsgRate = float64(count) * hz * float64(factor) / (float64(elapsed) * 1e6)
	return r
}
