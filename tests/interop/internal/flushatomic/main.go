// Command flushatomic is uroce's side of the lab's FLUSH and ATOMIC WRITE
// cells: the counterpart of tests/interop/testdata/flushatomic.c, which
// runs on rxe in a guest and describes the exchange. This program
// connects to it over TCP (it is always the TCP client) and plays the
// other role: the requester when the C program is the responder, and the
// other way round.
//
// Usage: flushatomic -d IFACE [-p PORT] [-r ROUNDS] [-n N] [-flush] [-neg] [-t DURATION] requester|responder HOST
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/uroce/uroce/tests/interop/internal/labpeer"
	"github.com/uroce/uroce/verbs"
)

const mrSize = 65536

// value is what round r writes to slot k, as in flushatomic.c.
func value(r, k int) uint64 {
	return 0x0123456789abcdef ^ uint64(r)<<56 ^ uint64(k+1)*0x9e3779b97f4a7c15
}

func main() {
	dev := flag.String("d", "", "`interface` to bind")
	port := flag.Int("p", 18515, "TCP `port` of the C program")
	rounds := flag.Int("r", 1, "`rounds` of ATOMIC WRITEs and FLUSHes")
	n := flag.Int("n", 64, "ATOMIC WRITEs per round (8-byte `slots`)")
	neg := flag.Bool("neg", false, "end with a misaligned ATOMIC WRITE")
	flush := flag.Bool("flush", false, "follow each round's ATOMIC WRITEs with a FLUSH of their range and one of the whole region")
	timeout := flag.Duration("t", 3*time.Minute, "give up after this long")
	flag.Parse()
	if flag.NArg() != 2 || (flag.Arg(0) != "requester" && flag.Arg(0) != "responder") || *n < 1 || *n > 1024 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: flushatomic -d IFACE [-p PORT] [-r ROUNDS] [-n N] [-flush] [-neg] [-t DURATION] requester|responder HOST")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *dev, net.JoinHostPort(flag.Arg(1), fmt.Sprint(*port)), flag.Arg(0) == "requester", *rounds, *n, *flush, *neg); err != nil {
		fmt.Fprintln(os.Stderr, "flushatomic:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dev, peer string, requester bool, rounds, n int, flush, neg bool) (err error) {
	// The device drives itself in the background: the responder only
	// waits on TCP while it answers.
	d, err := verbs.OpenInterface(dev)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	pd := d.AllocPD()
	mr, err := pd.RegMR(make([]byte, mrSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessFlushGlobal)
	if err != nil {
		return err
	}
	cq := d.CreateCQ(2*1024 + 8)
	q, err := pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 1024 + 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 8}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Printf("counters: %+v\n", q.Counters())
		err = errors.Join(err, q.Destroy())
	}()

	s, err := labpeer.Connect(ctx, d, q, mr, peer, verbs.ConnectOptions{
		Access:  verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic | verbs.AccessFlushGlobal,
		PathMTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, RdAtomic: 16,
		// rxe's reading of 7: under loss the C requester retries
		// forever too.
		Retrans: verbs.RetransRetry7Forever,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	raddr, rrkey := s.RemoteAddr, s.RemoteRKey
	expect := s.Expect

	if !requester {
		if err := expect("done"); err != nil {
			return err
		}
		var b strings.Builder
		for k := range n {
			fmt.Fprintf(&b, " %x", mr.Buf()[8*k:8*k+8])
		}
		fmt.Printf("mr:%s\n", b.String())
		if neg {
			if err := expect("neg"); err != nil {
				return err
			}
			fmt.Printf("qp state: %v\n", q.State())
		}
		return s.Say("bye")
	}

	wait := func(id uint64, op verbs.WCOpcode, wantOK bool) (verbs.WC, error) {
		return labpeer.Wait(ctx, cq, id, op, wantOK)
	}
	var id uint64
	var v [8]byte
	levels := []verbs.FlushLevel{verbs.FlushRange, verbs.FlushMR}
	if !flush {
		levels = nil
	}
	for r := range rounds {
		first := id
		for k := range n {
			binary.LittleEndian.PutUint64(v[:], value(r, k))
			wr := verbs.SendWR{ID: id, Opcode: verbs.WRAtomicWrite, Flags: verbs.SendSignaled | verbs.SendInline,
				InlineData: v[:], RemoteAddr: raddr + 8*uint64(k), RKey: rrkey}
			if err := q.PostSend(&wr); err != nil {
				return fmt.Errorf("post ATOMIC WRITE: %w", err)
			}
			id++
		}
		for _, lvl := range levels {
			wr := verbs.SendWR{ID: id, Opcode: verbs.WRFlush, Flags: verbs.SendSignaled, FlushType: verbs.FlushGlobal,
				FlushLevel: lvl, RemoteAddr: raddr, RKey: rrkey}
			if lvl == verbs.FlushRange {
				wr.FlushLen = uint32(8 * n)
			}
			if err := q.PostSend(&wr); err != nil {
				return fmt.Errorf("post FLUSH: %w", err)
			}
			id++
		}
		for k := range n {
			if _, err := wait(first+uint64(k), verbs.WCAtomicWrite, true); err != nil {
				return err
			}
		}
		for k := range levels {
			if _, err := wait(first+uint64(n+k), verbs.WCFlush, true); err != nil {
				return err
			}
		}
	}
	fmt.Printf("requester: %d rounds: %d atomic writes (WCAtomicWrite), %d flushes (WCFlush), all WCSuccess\n", rounds, rounds*n, len(levels)*rounds)
	if err := s.Say("done"); err != nil {
		return err
	}
	if neg {
		binary.LittleEndian.PutUint64(v[:], value(0, 0))
		wr := verbs.SendWR{ID: id, Opcode: verbs.WRAtomicWrite, Flags: verbs.SendSignaled | verbs.SendInline,
			InlineData: v[:], RemoteAddr: raddr + 4, RKey: rrkey}
		if err := q.PostSend(&wr); err != nil {
			return fmt.Errorf("post misaligned ATOMIC WRITE: %w", err)
		}
		w, err := wait(id, verbs.WCAtomicWrite, false)
		if err != nil {
			return err
		}
		fmt.Printf("misaligned atomic write: status %v (%d)\n", w.Status, w.Status)
		if err := s.Say("neg"); err != nil {
			return err
		}
	}
	return expect("bye")
}
