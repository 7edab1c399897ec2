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
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

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

	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", peer)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	in := bufio.NewReader(c)
	gid := d.GIDs()[0].As16()
	psn := rand.Uint32() & 0xffffff
	fmt.Fprintf(c, "%06x %06x %s %016x %08x\n", q.QPN(), psn, hex.EncodeToString(gid[:]), mr.Addr(), mr.RKey())
	line, err := in.ReadString('\n')
	if err != nil {
		return fmt.Errorf("the peer's address: %w", err)
	}
	var rqpn, rpsn, rrkey uint32
	var raddr uint64
	var rgid string
	if _, err := fmt.Sscanf(line, "%x %x %s %x %x", &rqpn, &rpsn, &rgid, &raddr, &rrkey); err != nil {
		return fmt.Errorf("bad address line %q: %w", line, err)
	}
	g, err := hex.DecodeString(rgid)
	if err != nil || len(g) != 16 {
		return fmt.Errorf("bad GID %q", rgid)
	}
	fmt.Printf("local:  QPN %06x PSN %06x GID %v addr %#x rkey %08x\n", q.QPN(), psn, d.GIDs()[0], mr.Addr(), mr.RKey())
	fmt.Printf("remote: QPN %06x PSN %06x GID %s addr %#x rkey %08x\n", rqpn, rpsn, rgid, raddr, rrkey)
	err = q.Connect(verbs.Endpoint{Addr: netip.AddrFrom16([16]byte(g)).Unmap(), QPN: rqpn, PSN: rpsn}, verbs.ConnectOptions{
		Access:  verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic | verbs.AccessFlushGlobal,
		PathMTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, RdAtomic: 16, PSN: psn,
		// rxe's reading of 7: under loss the C requester retries
		// forever too.
		Retrans: verbs.RetransRetry7Forever,
	})
	if err != nil {
		return err
	}
	expect := func(want string) error {
		l, err := in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("waiting for %q: %w", want, err)
		}
		if l = strings.TrimSpace(l); l != want {
			return fmt.Errorf("peer said %q, want %q", l, want)
		}
		return nil
	}

	// Neither side sends before the other's QP is ready to receive: a
	// request that reaches a QP still in INIT is dropped.
	if _, err := fmt.Fprintf(c, "rts\n"); err != nil {
		return err
	}
	if err := expect("rts"); err != nil {
		return err
	}

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
		_, err := fmt.Fprintf(c, "bye\n")
		return err
	}

	wait := func(id uint64, op verbs.WCOpcode, wantOK bool) (verbs.WC, error) {
		var wc [1]verbs.WC
		for {
			k, err := cq.Wait(ctx, wc[:])
			if err != nil {
				return wc[0], err
			}
			if k == 0 {
				continue
			}
			w := wc[0]
			switch {
			case wantOK && w.Status != verbs.WCSuccess:
				return w, fmt.Errorf("wr_id %d: status %v (%d)", w.WRID, w.Status, w.Status)
			case w.WRID != id:
				return w, fmt.Errorf("completion for wr_id %d, want %d", w.WRID, id)
			case w.Status == verbs.WCSuccess && w.Opcode != op:
				return w, fmt.Errorf("wr_id %d: opcode %v, want %v", w.WRID, w.Opcode, op)
			}
			return w, nil
		}
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
	if _, err := fmt.Fprintf(c, "done\n"); err != nil {
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
		if _, err := fmt.Fprintf(c, "neg\n"); err != nil {
			return err
		}
	}
	return expect("bye")
}
