package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// runner is the RDMA side of a test, driven by the exchange sequence.
// bench implements it over a verbs device; the replay tests implement it
// with canned values to check the sequence alone against captures.
type runner interface {
	// Setup creates the resources once Hello settled the system data
	// and returns this side's Dest for each QP.
	Setup(sys perftest.SysData) ([]perftest.Dest, error)
	// Connect brings the QPs to RTS toward the peer's.
	Connect(remote []perftest.Dest) error
	// PostRecvs posts the receives of one size (send tests).
	PostRecvs(size int) error
	// Latency runs one latency measurement.
	Latency(size int) (perftest.LatencyReport, error)
	// Bandwidth runs one bandwidth measurement: the sender's loop, or in
	// send_bw the server's receiving loop.
	Bandwidth(size int) (perftest.BandwidthReport, error)
}

// counterSource is a runner that can tell its transport counters (bench;
// the replay tests' canned runner has none).
type counterSource interface {
	Counters() verbs.Counters
}

// countersReporter is a reporter that shows them (printer).
type countersReporter interface {
	Counters(verbs.Counters)
}

// reporter takes the report lines as the test produces them.
type reporter interface {
	Connected(local, remote []perftest.Dest, sys perftest.SysData)
	Latency(perftest.LatencyReport)
	Bandwidth(perftest.BandwidthReport)
}

// session runs one test over an exchange connection.
type session struct {
	cfg    *config
	conn   *perftest.Conn
	r      runner
	out    reporter
	server bool
	// sys is the side's own system data offered in Hello.
	sys perftest.SysData
	// cmConnect, with -R, connects the QPs by rdma_cm once they exist
	// (rdmacm.go); Connect then only learns the peer's buffers.
	cmConnect func(sys perftest.SysData) error
}

// run performs the test and, with -stats, reports the counters whether
// the test succeeded or not: a failed run's retransmissions and NAKs are
// what explain it.
func (s *session) run() error {
	err := s.exchange()
	if s.cfg.stats {
		src, ok1 := s.r.(counterSource)
		dst, ok2 := s.out.(countersReporter)
		if ok1 && ok2 {
			dst.Counters(src.Counters())
		}
	}
	return err
}

// exchange performs the whole exchange of the test in perftest's order. The
// order is each test's main() in perftest 4.5, which current perftest
// keeps: any difference in the number of 108-byte handshakes deadlocks the
// two sides.
func (s *session) exchange() error {
	sys, err := s.conn.Hello(s.sys)
	if err != nil {
		return err
	}
	mine, err := s.r.Setup(sys)
	if err != nil {
		return err
	}
	if s.cmConnect != nil {
		if err := s.cmConnect(sys); err != nil {
			return err
		}
	}
	q := len(mine)
	rem := make([]perftest.Dest, q)
	hs := func(i int) error {
		d, err := s.conn.HandShake(mine[i])
		if err != nil {
			return err
		}
		rem[i] = d
		return nil
	}
	// perQP is perftest's "for (i = 0; i < num_of_qps; i++) ctx_hand_shake".
	perQP := func() error {
		for i := range q {
			if err := hs(i); err != nil {
				return err
			}
		}
		return nil
	}
	connect := func() error {
		if err := s.r.Connect(rem); err != nil {
			return err
		}
		s.out.Connected(mine, rem, sys)
		return nil
	}
	k := s.cfg.kind
	sizes := s.cfg.sizes()

	// Setup up to the QPs at RTS and a barrier after it.
	one := func() error { return hs(0) }
	var setup []func() error
	switch {
	case !k.bw && k.verb != verbSend:
		// write_lat, read_lat, atomic_lat: one handshake, one per QP,
		// connect, one per QP, and "an additional handshake ... after
		// moving qp to RTR".
		setup = []func() error{one, perQP, connect, perQP, one}
	case k.verb == verbSend:
		// send_lat, send_bw: one per QP, connect, one, one per QP.
		setup = []func() error{perQP, connect, one, perQP}
	default:
		// write_bw, read_bw: one per QP, connect, one per QP, one.
		setup = []func() error{perQP, connect, perQP, one}
	}
	for _, step := range setup {
		if err := step(); err != nil {
			return err
		}
	}

	switch {
	case k.verb == verbWrite && !k.bw:
		// Both sides measure; write_lat ends by closing the socket,
		// without the closing handshake.
		for _, size := range sizes {
			r, err := s.r.Latency(size)
			if err != nil {
				return err
			}
			s.out.Latency(r)
		}
		return nil
	case !k.bw && k.verb != verbSend:
		// read_lat, atomic_lat: the server only closes; the client
		// measures, then closes.
		if !s.server {
			for _, size := range sizes {
				r, err := s.r.Latency(size)
				if err != nil {
					return err
				}
				s.out.Latency(r)
			}
		}
	case !k.bw:
		// send_lat: receives posted, a barrier so the peer sends only
		// after they are, then the ping-pong; per size with -a.
		for _, size := range sizes {
			if err := s.r.PostRecvs(size); err != nil {
				return err
			}
			if err := hs(0); err != nil {
				return err
			}
			r, err := s.r.Latency(size)
			if err != nil {
				return err
			}
			s.out.Latency(r)
		}
	case k.verb == verbSend:
		// send_bw: the server posts receives, a barrier, both run (the
		// server counts what arrives), and with -a one more barrier
		// after each size. With -b both post receives and both send;
		// counting iterations they then swap reports and print the sum
		// (perftest's print_full_bw_report), with -D each prints its own.
		for _, size := range sizes {
			if s.server || s.cfg.bidir {
				if err := s.r.PostRecvs(size); err != nil {
					return err
				}
			}
			if err := hs(0); err != nil {
				return err
			}
			if s.cfg.runInf {
				if _, err := s.infinitely(size); err != nil {
					return err
				}
				break
			}
			r, err := s.r.Bandwidth(size)
			if err != nil {
				return err
			}
			if s.cfg.bidir && s.cfg.duration == 0 {
				if r, err = s.sumReports(r); err != nil {
					return err
				}
			}
			s.out.Bandwidth(r)
			if s.cfg.all {
				if err := hs(0); err != nil {
					return err
				}
			}
		}
	case s.cfg.bidir:
		// write_bw, read_bw, atomic_bw -b: both run after a barrier
		// (with -a one more after each size, as perftest from 4.6 on
		// does), then swap reports and print their sum. With
		// --run_infinitely both run at once, without a barrier.
		for _, size := range sizes {
			if s.cfg.runInf {
				if _, err := s.infinitely(size); err != nil {
					return err
				}
				break
			}
			if err := hs(0); err != nil {
				return err
			}
			r, err := s.r.Bandwidth(size)
			if err != nil {
				return err
			}
			if s.cfg.all {
				if err := hs(0); err != nil {
					return err
				}
			}
			if r, err = s.sumReports(r); err != nil {
				return err
			}
			s.out.Bandwidth(r)
		}
	default:
		// write_bw, read_bw, atomic_bw: the server waits in a handshake
		// while the client runs, then they swap reports (the server
		// prints the client's).
		var last perftest.BandwidthReport
		if !s.server {
			for _, size := range sizes {
				var r perftest.BandwidthReport
				var err error
				if s.cfg.runInf {
					if r, err = s.infinitely(size); errors.Is(err, errUserStopped) {
						s.note("\n User stopped traffic\n")
						err = nil
					}
				} else if r, err = s.r.Bandwidth(size); err == nil {
					s.out.Bandwidth(r)
				}
				if err != nil {
					return err
				}
				last = r
			}
		}
		if err := hs(0); err != nil {
			if s.server && s.cfg.runInf && errors.Is(err, io.EOF) {
				// --run_infinitely's client ends when interrupted, by
				// closing the connection: the test is over.
				return nil
			}
			return err
		}
		var mineRep perftest.BWReport
		if !s.server {
			mineRep = perftest.BWReport{Size: uint64(last.Bytes), Iters: uint64(last.Iters),
				BWPeak: last.Peak, BWAvg: last.Avg, MsgRate: last.MsgRate}
		}
		theirs, err := s.conn.ExchangeBWReports(mineRep)
		if err != nil {
			return err
		}
		if s.server && s.cfg.runInf {
			s.note(" Client closed connection\n") // perftest 25.01's words
		} else if s.server {
			s.out.Bandwidth(perftest.BandwidthReport{Bytes: int(theirs.Size), Iters: int(theirs.Iters),
				Peak: theirs.BWPeak, Avg: theirs.BWAvg, MsgRate: theirs.MsgRate, Gbits: s.cfg.gbits})
		}
	}
	if err := s.conn.Close(mine[0]); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// infiniteRunner is a runner that runs --run_infinitely's loop (bench).
type infiniteRunner interface {
	Infinitely(size int, emit func(perftest.BandwidthReport)) (perftest.BandwidthReport, error)
}

// infinitely runs --run_infinitely, printing a report every -D seconds.
func (s *session) infinitely(size int) (perftest.BandwidthReport, error) {
	ir, ok := s.r.(infiniteRunner)
	if !ok {
		return perftest.BandwidthReport{}, fmt.Errorf("--run_infinitely: %w", errors.ErrUnsupported)
	}
	return ir.Infinitely(size, s.out.Bandwidth)
}

// noter is a reporter that prints a line of perftest's own (printer).
type noter interface{ Note(string) }

// note prints msg if the reporter prints such lines.
func (s *session) note(msg string) {
	if n, ok := s.out.(noter); ok {
		n.Note(msg)
	}
}

// sumReports swaps this side's report of a bidirectional test with the
// peer's and returns their sum, as perftest's print_full_bw_report adds
// the remote report's rates to its own.
func (s *session) sumReports(r perftest.BandwidthReport) (perftest.BandwidthReport, error) {
	theirs, err := s.conn.ExchangeBWReports(perftest.BWReport{Size: uint64(r.Bytes), Iters: uint64(r.Iters),
		BWPeak: r.Peak, BWAvg: r.Avg, MsgRate: r.MsgRate})
	if err != nil {
		return r, err
	}
	r.Peak += theirs.BWPeak
	r.Avg += theirs.BWAvg
	r.MsgRate += theirs.MsgRate
	return r, nil
}
