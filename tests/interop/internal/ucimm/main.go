// Command ucimm is uroce's side of the lab's UC immediate data cells: the
// counterpart of tests/interop/testdata/ucimm.c, which runs on rxe in a
// guest and describes the exchange. This program connects to it over TCP
// (it is always the TCP client) and plays the other role: the sender of
// SENDs and RDMA WRITEs with immediate over a UC QP, or their receiver.
//
// Usage: ucimm -d IFACE [-p PORT] [-r ROUNDS] [-s SIZE] [-onewrite] [-t DURATION] sender|receiver HOST
package main

import (
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

// The layout and the messages of a round, as in ucimm.c.
const (
	mrSize = 131072
	slot   = 4096
	recvs  = 16 // receives posted: marks asked for twice take two
	write1 = 65536
	write2 = 98304
	small  = 200
	mark   = 0xd4
)

var msgs = [...]struct {
	tag   byte
	write bool
	off   int
	name  string
}{
	{0xa1, false, 0, "SENDs"},
	{0xb2, true, write1, "multi-packet WRITEs"},
	{0xc3, true, write2, "one-packet WRITEs"},
}

// sent says which messages a round has: -onewrite leaves out the
// multi-packet WRITE, as in ucimm.c.
var sent = [len(msgs)]bool{true, true, true}

// pattern is byte i of message tag in round r, as in ucimm.c.
func pattern(tag byte, r, i int) byte { return byte(int(tag) + r*13 + i*7) }

func main() {
	dev := flag.String("d", "", "`interface` to bind")
	port := flag.Int("p", 18515, "TCP `port` of the C program")
	rounds := flag.Int("r", 1, "`rounds` of three messages with immediate")
	size := flag.Int("s", 3000, "`bytes` of the SEND and the first WRITE")
	oneWrite := flag.Bool("onewrite", false, "leave the multi-packet WRITE out of each round")
	timeout := flag.Duration("t", 3*time.Minute, "give up after this long")
	flag.Parse()
	sent[1] = !*oneWrite
	if flag.NArg() != 2 || (flag.Arg(0) != "sender" && flag.Arg(0) != "receiver") ||
		*rounds < 1 || *rounds > 0xffffff || *size < 1 || *size > slot {
		fmt.Fprintln(os.Stderr, "usage: ucimm -d IFACE [-p PORT] [-r ROUNDS] [-s SIZE] [-onewrite] [-t DURATION] sender|receiver HOST")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *dev, net.JoinHostPort(flag.Arg(1), fmt.Sprint(*port)), flag.Arg(0) == "sender", *rounds, *size); err != nil {
		fmt.Fprintln(os.Stderr, "ucimm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dev, peer string, send bool, rounds, size int) (err error) {
	d, err := verbs.OpenInterface(dev)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	pd := d.AllocPD()
	mr, err := pd.RegMR(make([]byte, mrSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	cq := d.CreateCQ(64)
	q, err := pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: recvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer func() {
		// Lost packets never move a UC QP to the error state (IBA
		// 9.8.2: the responder drops the message, the requester never
		// hears).
		fmt.Printf("qp state: %v\n", q.State())
		fmt.Printf("counters: %+v\n", q.Counters())
		err = errors.Join(err, q.Destroy())
	}()
	s, err := labpeer.Connect(ctx, d, q, mr, peer, verbs.ConnectOptions{
		Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite, PathMTU: 1024,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if send {
		return sender(ctx, s, q, cq, mr, rounds, size)
	}
	return receiver(ctx, s, q, cq, mr, rounds, size)
}

func postImm(q *verbs.QueuePair, mr *verbs.MR, write bool, id uint64, off, n int, imm uint32, raddr uint64, rkey uint32) error {
	op := verbs.WRSendWithImm
	if write {
		op = verbs.WRWriteWithImm
	}
	// Imm is in host order: the engine puts it on the wire in network
	// order, where rdma-core's imm_data already is.
	return q.PostSend(&verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(off, n)},
		Imm: imm, RemoteAddr: raddr, RKey: rkey})
}

// sender plays ucimm.c's sender: three messages with immediate a round,
// each round on the receiver's "go", and a mark on each "mark".
func sender(ctx context.Context, s *labpeer.Session, q *verbs.QueuePair, cq *verbs.CQ, mr *verbs.MR, rounds, size int) error {
	buf := mr.Buf()
	r, marks, each := 0, 0, 0
	for _, ok := range sent {
		if ok {
			each++
		}
	}
	for {
		line, err := s.Line()
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		if line == "done" {
			break
		}
		if line == "mark" {
			// The mark of the round just sent, behind it.
			if err := postImm(q, mr, false, 9, write2+slot, 8, mark<<24|uint32(r-1), 0, 0); err != nil {
				return err
			}
			if _, err := labpeer.Wait(ctx, cq, 9, verbs.WCSend, true); err != nil {
				return err
			}
			marks++
			continue
		}
		if line != "go" || r >= rounds {
			return fmt.Errorf("peer said %q after %d rounds", line, r)
		}
		for k, m := range msgs {
			if !sent[k] {
				continue
			}
			n := size
			if k == 2 {
				n = small
			}
			for i := range n {
				buf[m.off+i] = pattern(m.tag, r, i)
			}
			if err := postImm(q, mr, m.write, uint64(k), m.off, n, uint32(m.tag)<<24|uint32(r), s.RemoteAddr+uint64(m.off), s.RemoteRKey); err != nil {
				return err
			}
		}
		for k, m := range msgs {
			if !sent[k] {
				continue
			}
			op := verbs.WCSend
			if m.write {
				op = verbs.WCWrite
			}
			if _, err := labpeer.Wait(ctx, cq, uint64(k), op, true); err != nil {
				return err
			}
		}
		r++
	}
	if r != rounds {
		return fmt.Errorf("peer said done after %d of %d rounds", r, rounds)
	}
	fmt.Printf("sender: %d rounds: %d messages with immediate and %d marks sent, all WCSuccess\n", rounds, each*rounds, marks)
	return s.Say("bye")
}

// receiver plays ucimm.c's receiver: it checks every message with
// immediate that comes, and asks for a mark when a round's are not all
// there within half a second; once the mark is in, the rest were lost.
func receiver(ctx context.Context, s *labpeer.Session, q *verbs.QueuePair, cq *verbs.CQ, mr *verbs.MR, rounds, size int) error {
	buf := mr.Buf()
	postRecv := func(i uint64) error {
		return q.PostRecv(&verbs.RecvWR{ID: i, SGL: []verbs.SGE{mr.SGE(int(i)*slot, slot)}})
	}
	for i := range uint64(recvs) {
		if err := postRecv(i); err != nil {
			return err
		}
	}
	var delivered [len(msgs)]int
	marks := 0
	var wc [1]verbs.WC
	for r := range rounds {
		clear(buf[write1 : write1+size])
		clear(buf[write2 : write2+small])
		var got [len(msgs)]bool
		left, unanswered := 0, 0
		for _, ok := range sent {
			if ok {
				left++
			}
		}
		if err := s.Say("go"); err != nil {
			return err
		}
		deadline := time.Now().Add(500 * time.Millisecond)
		for left > 0 {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			n, err := cq.Wait(wctx, wc[:])
			cancel()
			if err != nil {
				if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
					return fmt.Errorf("round %d: %w", r, err)
				}
				// Eight marks in a row lost at 1 % loss is one in
				// 10^16: the responder takes nothing.
				if unanswered++; unanswered > 8 {
					return fmt.Errorf("round %d: nothing came after 8 marks", r)
				}
				if err := s.Say("mark"); err != nil {
					return err
				}
				marks++
				deadline = time.Now().Add(500 * time.Millisecond)
				continue
			}
			if n == 0 {
				continue
			}
			unanswered = 0
			w := wc[0]
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("round %d: wr_id %d: status %v (%d)", r, w.WRID, w.Status, w.Status)
			}
			if w.Flags&verbs.WCWithImm == 0 {
				return fmt.Errorf("round %d: completion flags %#x lack WCWithImm", r, w.Flags)
			}
			tag, round := byte(w.Imm>>24), int(w.Imm&0xffffff)
			data := buf[int(w.WRID)*slot:]
			if err := postRecv(w.WRID); err != nil {
				return err
			}
			if tag == mark {
				if w.Opcode != verbs.WCRecv {
					return fmt.Errorf("round %d: mark's opcode %v, want WCRecv", r, w.Opcode)
				}
				if round > r {
					return fmt.Errorf("round %d: mark of round %d", r, round)
				}
				if round == r {
					break
				}
				continue // an earlier round's mark, asked for twice
			}
			k := 0
			for k < len(msgs) && msgs[k].tag != tag {
				k++
			}
			if k == len(msgs) || !sent[k] {
				return fmt.Errorf("round %d: immediate %08x has no tag of this run", r, w.Imm)
			}
			if round != r {
				return fmt.Errorf("round %d: immediate %08x is of round %d", r, w.Imm, round)
			}
			if got[k] {
				return fmt.Errorf("round %d: second message with immediate %08x", r, w.Imm)
			}
			m := msgs[k]
			op, want := verbs.WCRecv, size
			if m.write {
				op, data = verbs.WCRecvRDMAWithImm, buf[m.off:]
			}
			if k == 2 {
				want = small
			}
			if w.Opcode != op {
				return fmt.Errorf("round %d: immediate %08x: opcode %v, want %v", r, w.Imm, w.Opcode, op)
			}
			if int(w.ByteLen) != want {
				return fmt.Errorf("round %d: immediate %08x: byte_len %d, want %d", r, w.Imm, w.ByteLen, want)
			}
			for i := range want {
				if data[i] != pattern(tag, r, i) {
					return fmt.Errorf("round %d: immediate %08x: byte %d is %02x, want %02x", r, w.Imm, i, data[i], pattern(tag, r, i))
				}
			}
			got[k] = true
			delivered[k]++
			left--
		}
	}
	if err := s.Say("done"); err != nil {
		return err
	}
	fmt.Printf("receiver: %d rounds: delivered", rounds)
	for k, m := range msgs {
		fmt.Printf(" %d %s", delivered[k], m.name)
	}
	fmt.Printf(" with immediate, each byte-exact with its round's immediate, none twice; %d marks\n", marks)
	return s.Expect("bye")
}
