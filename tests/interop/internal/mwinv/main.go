// Command mwinv is uroce's side of the lab's memory window cells: the
// counterpart of tests/interop/testdata/mwinv.c, which runs on rxe in a
// guest and describes the exchange. This program connects to it over TCP
// (it is always the TCP client) and plays the other role: the user of the
// C program's windows, or the owner of windows the C program uses.
//
// Usage: mwinv -d IFACE [-p PORT] [-r ROUNDS] [-neg] [-t DURATION] owner|user HOST
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/uroce/uroce/tests/interop/internal/labpeer"
	"github.com/uroce/uroce/verbs"
)

const mrSize = 65536

// pattern is byte i of what round r writes through the window, as in
// mwinv.c; round -1 is the type 1 window's region.
func pattern(r, i int) byte { return byte(r*31 + i*7 + 1) }

func main() {
	dev := flag.String("d", "", "`interface` to bind")
	port := flag.Int("p", 18515, "TCP `port` of the C program")
	rounds := flag.Int("r", 1, "`rounds` of bind, WRITE, READ and SEND with invalidate")
	neg := flag.Bool("neg", false, "end with a WRITE through the invalidated key")
	timeout := flag.Duration("t", 3*time.Minute, "give up after this long")
	flag.Parse()
	if flag.NArg() != 2 || (flag.Arg(0) != "owner" && flag.Arg(0) != "user") || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: mwinv -d IFACE [-p PORT] [-r ROUNDS] [-neg] [-t DURATION] owner|user HOST")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *dev, net.JoinHostPort(flag.Arg(1), fmt.Sprint(*port)), flag.Arg(0) == "owner", *rounds, *neg); err != nil {
		fmt.Fprintln(os.Stderr, "mwinv:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dev, peer string, owner bool, rounds int, neg bool) (err error) {
	d, err := verbs.OpenInterface(dev)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	pd := d.AllocPD()
	mr, err := pd.RegMR(make([]byte, mrSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessMWBind)
	if err != nil {
		return err
	}
	cq := d.CreateCQ(64)
	q, err := pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Printf("counters: %+v\n", q.Counters())
		err = errors.Join(err, q.Destroy())
	}()
	s, err := labpeer.Connect(ctx, d, q, mr, peer, verbs.ConnectOptions{
		Access:  verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead,
		PathMTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, RdAtomic: 16,
		// rxe's reading of 7: under loss the C side retries forever too.
		Retrans: verbs.RetransRetry7Forever,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	wait := func(id uint64, op verbs.WCOpcode) (verbs.WC, error) { return labpeer.Wait(ctx, cq, id, op, true) }
	if owner {
		return own(s, pd, q, mr, rounds, neg, wait)
	}
	return use(ctx, s, q, cq, mr, rounds, neg, wait)
}

// own plays mwinv.c's owner: a type 1 window over the region's first
// 4 KiB for READ, then per round a type 2 window over [8192, +8192) for
// READ and WRITE, which the peer must take back with its SEND with
// invalidate.
func own(s *labpeer.Session, pd *verbs.PD, q *verbs.QueuePair, mr *verbs.MR, rounds int, neg bool,
	wait func(uint64, verbs.WCOpcode) (verbs.WC, error)) error {
	buf := mr.Buf()
	for i := range 4096 {
		buf[i] = pattern(-1, i)
	}
	mw1, err := pd.AllocMW(verbs.MWType1)
	if err != nil {
		return err
	}
	mw2, err := pd.AllocMW(verbs.MWType2)
	if err != nil {
		return err
	}
	key1, err := q.BindMW(mw1, 1, verbs.SendSignaled, mr, 0, 4096, verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	if _, err := wait(1, verbs.WCBindMW); err != nil {
		return err
	}
	if err := s.Say(fmt.Sprintf("mw1 %08x %016x", key1, mr.Addr())); err != nil {
		return err
	}
	// Every other round offers a fast-registration region over the same
	// bytes instead of the window: rxe's SEND with invalidate takes
	// either back, and its programs cannot register one of their own
	// (REG_MR is the kernel's).
	win := buf[8192:]
	fast, err := pd.AllocFastMR(8192)
	if err != nil {
		return err
	}
	if err := fast.Map(win[:8192]); err != nil {
		return err
	}
	regs := 0
	for r := range rounds {
		id := 100 + uint64(r)
		var key uint32
		if r%2 == 0 {
			if key, err = q.BindMW(mw2, id, verbs.SendSignaled, mr, 8192, 8192, verbs.AccessRemoteRead|verbs.AccessRemoteWrite); err != nil {
				return err
			}
			if _, err := wait(id, verbs.WCBindMW); err != nil {
				return err
			}
		} else {
			reg := fast.Reg(verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite)
			if err := q.PostSend(&verbs.SendWR{ID: id, Opcode: verbs.WRRegMR, Flags: verbs.SendSignaled, Reg: reg}); err != nil {
				return err
			}
			if _, err := wait(id, verbs.WCRegMR); err != nil {
				return err
			}
			key = reg.Key
			regs++
		}
		if err := q.PostRecv(&verbs.RecvWR{ID: 1000 + uint64(r), SGL: []verbs.SGE{mr.SGE(60000, 64)}}); err != nil {
			return err
		}
		if err := s.Say(fmt.Sprintf("mw2 %08x %016x", key, mr.Addr()+8192)); err != nil {
			return err
		}
		if err := s.Expect("sent"); err != nil {
			return err
		}
		wc, err := wait(1000+uint64(r), verbs.WCRecv)
		if err != nil {
			return err
		}
		if wc.Flags&verbs.WCWithInv == 0 || wc.Imm != key {
			return fmt.Errorf("round %d: receive flags %#x key %08x, want WCWithInv of %08x", r, wc.Flags, wc.Imm, key)
		}
		for i := range 3000 {
			if win[100+i] != pattern(r, i) {
				return fmt.Errorf("round %d: window byte %d is %02x, want %02x", r, i, win[100+i], pattern(r, i))
			}
		}
	}
	fmt.Printf("owner: %d rounds: type 2 window bound, written, read and invalidated by SEND with invalidate; every receive WCWithInv of its key\n", rounds)
	fmt.Printf("fast registration: %d of the rounds through a region registered by WRRegMR instead\n", regs)
	if err := s.Say("checked"); err != nil {
		return err
	}
	if neg {
		if err := s.Expect("neg"); err != nil {
			return err
		}
		fmt.Printf("qp state: %v\n", q.State())
	}
	return s.Say("bye")
}

// use plays mwinv.c's user of the peer's windows.
func use(ctx context.Context, s *labpeer.Session, q *verbs.QueuePair, cq *verbs.CQ, mr *verbs.MR, rounds int, neg bool,
	wait func(uint64, verbs.WCOpcode) (verbs.WC, error)) error {
	buf := mr.Buf()
	rdma := func(op verbs.WROpcode, id uint64, off, n int, raddr uint64, rkey uint32) error {
		return q.PostSend(&verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(off, n)}, RemoteAddr: raddr, RKey: rkey})
	}
	var key uint32
	var addr uint64
	line, err := s.Line()
	if err != nil {
		return err
	}
	if _, err := fmt.Sscanf(line, "mw1 %x %x", &key, &addr); err != nil {
		return fmt.Errorf("bad mw1 line %q: %w", line, err)
	}
	if err := rdma(verbs.WRRead, 1, 0, 4096, addr, key); err != nil {
		return err
	}
	if _, err := wait(1, verbs.WCRead); err != nil {
		return err
	}
	for i := range 4096 {
		if buf[i] != pattern(-1, i) {
			return fmt.Errorf("type 1 window byte %d is %02x, want %02x", i, buf[i], pattern(-1, i))
		}
	}
	for r := range rounds {
		line, err := s.Line()
		if err != nil {
			return err
		}
		if _, err := fmt.Sscanf(line, "mw2 %x %x", &key, &addr); err != nil {
			return fmt.Errorf("bad mw2 line %q: %w", line, err)
		}
		for i := range 3000 {
			buf[4096+i] = pattern(r, i)
		}
		clear(buf[16384 : 16384+3000])
		id := 10 * uint64(r+1)
		if err := rdma(verbs.WRWrite, id, 4096, 3000, addr+100, key); err != nil {
			return err
		}
		if err := rdma(verbs.WRRead, id+1, 16384, 3000, addr+100, key); err != nil {
			return err
		}
		// Fenced: a READ response lost and asked for again after the
		// invalidation would find the key gone.
		if err := q.PostSend(&verbs.SendWR{ID: id + 2, Opcode: verbs.WRSendWithInv, Flags: verbs.SendSignaled | verbs.SendFence,
			SGL: []verbs.SGE{mr.SGE(0, 8)}, InvalidateRKey: key}); err != nil {
			return err
		}
		for k, op := range []verbs.WCOpcode{verbs.WCWrite, verbs.WCRead, verbs.WCSend} {
			if _, err := wait(id+uint64(k), op); err != nil {
				return err
			}
		}
		if !bytes.Equal(buf[4096:4096+3000], buf[16384:16384+3000]) {
			return fmt.Errorf("round %d: the READ through the window differs from the WRITE", r)
		}
		if err := s.Say("sent"); err != nil {
			return err
		}
	}
	if err := s.Expect("checked"); err != nil {
		return err
	}
	fmt.Printf("user: type 1 window read; %d rounds: WRITE, READ and SEND with invalidate through a type 2 window, all WCSuccess\n", rounds)
	if neg {
		if err := rdma(verbs.WRWrite, 5, 0, 8, addr, key); err != nil {
			return err
		}
		wc, err := labpeer.Wait(ctx, cq, 5, verbs.WCWrite, false)
		if err != nil {
			return err
		}
		fmt.Printf("write after invalidate: status %v (%d)\n", wc.Status, wc.Status)
		if err := s.Say("neg"); err != nil {
			return err
		}
	}
	return s.Expect("bye")
}
