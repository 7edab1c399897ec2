package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// stream is the bandwidth loop of the modes perftest runs in loops of
// their own: duration mode (-D: run_iter_bw, run_iter_bw_server and
// run_iter_bi with test_type DURATION), --run_infinitely
// (run_iter_bw_infinitely and run_iter_bw_infinitely_server) and send_bw
// -b (run_iter_bi), where a side sends and receives at once.
//
// A side sends if it is the client or the test is bidirectional, and
// receives SENDs in send_bw if it is the server or the test is
// bidirectional. A bidirectional send_bw server sends only after the
// client's first SEND arrives (run_iter_bi's before_first_rx), and a side
// that only receives starts its clock then (set_on_first_rx_packet).
//
// Counting iterations (send_bw -b) it returns the report of its sends as
// run_iter_bw's. For -D it counts the messages that complete, sent and
// received, while the clock is between the warm-up and the cool-down,
// and returns their rate. With --run_infinitely it hands emit a report
// every -D seconds, of the messages since the last one, and returns only
// on an error, when stop receives (SIGINT), or after maxReports (tests).
func (b *bench) stream(size int, emit func(perftest.BandwidthReport), stop <-chan os.Signal) (perftest.BandwidthReport, error) {
	c := b.cfg
	name := c.kind.name
	q := len(b.qps)
	send := !b.server || c.bidir
	recv := c.kind.verb == verbSend && (b.server || c.bidir)
	hold := send && recv && b.server
	timed := c.durationMode()
	iters := c.iters
	cqMod := c.cqModUsed()
	var posted, completed []time.Duration
	if !timed {
		posted = make([]time.Duration, iters*q)
		completed = make([]time.Duration, iters*q)
	}
	scnt, ccnt := make([]int, q), make([]int, q)
	rposted := make([]int, q)
	for i := range rposted {
		rposted[i] = min(c.rx, iters) // PostRecvs posted these
	}
	var wrs []verbs.SendWR
	var sges []verbs.SGE
	if send {
		wrs, sges = make([]verbs.SendWR, q), make([]verbs.SGE, q)
		for i := range q {
			wrs[i] = *b.prepare(i, size)
			sges[i] = b.sge[0]
			wrs[i].SGL = sges[i : i+1]
		}
	}
	every := time.Duration(c.duration) * time.Second
	// The -b WRITE and READ tests count one direction's messages in a
	// --run_infinitely report, and perftest doubles its rates.
	factor := 1
	if c.runInf && c.bidir && c.kind.verb != verbSend {
		factor = 2
	}
	var (
		started            = send && !hold
		t0                 = b.now()
		sampleFrom         time.Duration
		sampleTo           time.Duration
		sampling, sampled  bool
		count, reports     int
		totS, totC, totR   int
		last               perftest.BandwidthReport
		lastAt             = t0
		wantSent, wantRecv int
	)
	if send {
		wantSent = iters * q
	}
	if recv {
		wantRecv = iters * q
	}
	for {
		now := b.now()
		counting := false
		switch {
		case !timed:
			if totC >= wantSent && totR >= wantRecv {
				return perQP(b.report(size, posted, completed, cqMod), iters), nil
			}
		case !started:
		case c.runInf:
			counting = true
			select {
			case <-stop:
				return last, errUserStopped
			default:
			}
			if now-lastAt >= every {
				last = perftest.DurationBandwidth(size, count, now-lastAt, factor, c.gbits)
				emit(last)
				count, lastAt = 0, now
				if reports++; c.maxReports > 0 && reports >= c.maxReports {
					return last, nil
				}
			}
		default:
			switch c.phaseAt(now - t0) {
			case phaseSample:
				if !sampling {
					sampling, sampleFrom = true, now
				}
				counting = true
			case phaseCoolDown, phaseEnd:
				if sampling && !sampled {
					sampled, sampleTo = true, now
				}
			}
			if sampled && c.phaseAt(now-t0) == phaseEnd {
				return perftest.DurationBandwidth(size, count, sampleTo-sampleFrom, 1, c.gbits), nil
			}
		}
		moved := false
		if send && started {
			for i, qp := range b.qps {
				for (timed || scnt[i] < iters) && scnt[i]-ccnt[i] < c.tx {
					wr := &wrs[i]
					wr.Flags &^= verbs.SendSignaled
					// As sendBW: the WR ID carries the QP and how many
					// WRs its completion accounts for.
					if n := scnt[i] + 1; n%cqMod == 0 || !timed && n == iters {
						wr.Flags |= verbs.SendSignaled
						wr.ID = uint64(i)<<32 | uint64(n-(n-1)/cqMod*cqMod)
					}
					if !timed {
						posted[totS] = b.now()
					}
					if err := qp.PostSend(wr); err != nil {
						return last, fmt.Errorf("%s: post send: %w", name, err)
					}
					scnt[i]++
					totS++
				}
			}
		}
		if recv {
			n := b.rcq.Poll(b.wc[:])
			if n > 0 {
				moved = true
				if !started {
					started, t0, lastAt = true, b.now(), b.now()
				}
			}
			for _, wc := range b.wc[:n] {
				if wc.Status != verbs.WCSuccess {
					return last, fmt.Errorf("%s: %w", name, &wcError{wc: wc, recv: true, scnt: totR})
				}
				totR++
				if counting {
					count++
				}
				i := int(wc.WRID)
				if timed || rposted[i] < iters {
					if err := b.qps[i].PostRecv(b.recvWR(i, size)); err != nil {
						return last, fmt.Errorf("%s: post recv: %w", name, err)
					}
					rposted[i]++
				}
			}
		}
		if send {
			n := b.scq.Poll(b.wc[:])
			t := b.now()
			for _, wc := range b.wc[:n] {
				moved = true
				if wc.Status != verbs.WCSuccess {
					return last, fmt.Errorf("%s: %w", name, &wcError{wc: wc, scnt: totS, ccnt: totC})
				}
				i, covered := int(wc.WRID>>32), int(wc.WRID&0xffffffff)
				ccnt[i] += covered
				if counting {
					count += covered
				}
				for ; !timed && covered > 0; covered-- {
					completed[totC] = t
					totC++
				}
			}
		}
		if moved {
			b.moved()
		} else if err := b.idle(); err != nil {
			return last, fmt.Errorf("%s: %d sent, %d completed, %d received: %w", name, totS, totC, totR, err)
		}
	}
}

// errUserStopped is --run_infinitely's end by SIGINT.
var errUserStopped = errors.New("user stopped traffic")

// Infinitely runs --run_infinitely's loop (stream), handing each report
// to emit. A client of a one-way WRITE, READ or atomic test ends it on
// SIGINT and returns errUserStopped, so that the test ends with the
// closing exchange, as perftest 25.01's run_iter_bw_infinitely does
// (handle_sigint); the others end only with the process, as perftest's.
func (b *bench) Infinitely(size int, emit func(perftest.BandwidthReport)) (perftest.BandwidthReport, error) {
	b.moved()
	c := b.cfg
	stop := c.interrupt
	if stop == nil && !b.server && !c.bidir && c.kind.verb != verbSend {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		defer signal.Stop(ch)
		stop = ch
	}
	return b.stream(size, emit, stop)
}
