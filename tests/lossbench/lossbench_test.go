package lossbench_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/hist"
	"github.com/uroce/uroce/verbs"
)

const (
	msgSize = 64 << 10
	depth   = 16 // WRITEs outstanding
	warmup  = 500 * time.Millisecond
	measure = 3 * time.Second
	pingLen = 64
	pings   = 3000
	// pingSends is how many send buffers each side of the ping-pong
	// cycles through. An echo waits for the completion of the send
	// before it in its buffer; with two buffers a lost ACK of the echo
	// before last would hold the next echo until the responder's timer
	// resent it, a wait of the harness, not of the ping.
	pingSends = 8
	// phaseLimit only detects a hung phase; it is never a measurement.
	phaseLimit = time.Minute
)

// modes are the two retransmission schemes compared, both with the
// default adaptive timer and IBA timeout (14, 67 ms).
var modes = []struct {
	name    string
	retrans verbs.RetransFlags
}{
	{"go-back-N", 0},
	{"selective", verbs.RetransSelective},
}

// hosts are a link's two uroce devices: the requester's, inline (the
// test's Waits on it drive it), and the responder's, on its own
// goroutine, as a server that never polls. Each has one region for the bulk phase (16
// slots of 64 KiB: the source on the requester, the destination on the
// responder) and one for the ping-pong.
type hosts struct {
	req, resp         *verbs.Device
	reqPD, respPD     *verbs.PD
	src, dst          *verbs.MR
	reqPing, respPing *verbs.MR
}

func openHosts(t *testing.T, tp *topo) *hosts {
	h := &hosts{}
	if err := tp.reqNS.Do(func() (err error) { h.req, err = verbs.OpenAddr(tp.reqAddr, verbs.Inline()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.req.Close() })
	if err := tp.respNS.Do(func() (err error) { h.resp, err = verbs.OpenAddr(tp.respAddr, verbs.Inline()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.resp.Close() })
	h.resp.Start()
	h.reqPD, h.respPD = h.req.AllocPD(), h.resp.AllocPD()
	reg := func(pd *verbs.PD, n int) *verbs.MR {
		mr, err := pd.RegMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		return mr
	}
	h.src, h.dst = reg(h.reqPD, depth*msgSize), reg(h.respPD, depth*msgSize)
	h.reqPing, h.respPing = reg(h.reqPD, (2+pingSends)*pingLen), reg(h.respPD, (2+pingSends)*pingLen)
	return h
}

// pair is a connected pair of fresh QPs, one on each host.
type pair struct {
	q, rq   *verbs.QueuePair
	cq, rcq *verbs.CQ
}

func (h *hosts) connect(t *testing.T, retrans verbs.RetransFlags) *pair {
	t.Helper()
	p := &pair{cq: h.req.CreateCQ(4 * depth), rcq: h.resp.CreateCQ(4 * depth)}
	var err error
	qcap := verbs.QPCap{MaxSendWR: depth, MaxRecvWR: 4}
	if p.q, err = h.reqPD.CreateQP(&verbs.QPInit{SendCQ: p.cq, RecvCQ: p.cq, Cap: qcap}); err != nil {
		t.Fatal(err)
	}
	if p.rq, err = h.respPD.CreateQP(&verbs.QPInit{SendCQ: p.rcq, RecvCQ: p.rcq, Cap: qcap}); err != nil {
		t.Fatal(err)
	}
	// Both ends ask for the same scheme: selective repeat needs both.
	o := verbs.ConnectOptions{PathMTU: pathMTU, Retrans: retrans, PSN: 1000}
	if err := p.q.Connect(p.rq.Endpoint(5000), o); err != nil {
		t.Fatal(err)
	}
	o.PSN = 5000
	if err := p.rq.Connect(p.q.Endpoint(1000), o); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pair) destroy(t *testing.T) {
	t.Helper()
	for _, err := range []error{p.q.Destroy(), p.rq.Destroy(), p.cq.Destroy(), p.rcq.Destroy()} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// stamp fills a message with words that name it (seq) and their place in
// it, so that a packet placed at the wrong offset, or one of an earlier
// message placed late, shows in the destination.
func stamp(b []byte, seq uint64) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], seq<<32|uint64(i))
	}
}

// bulkResult is the bulk phase's measurements.
type bulkResult struct {
	goodput     float64 // MB/s of payload in the measured window
	retransmits uint64
	timeouts    uint64
	early       uint64 // of the timeouts, the adaptive RTO's before the IBA timeout
	fwd, rev    uint64 // packets the rules dropped each way
	pathDrops   pathDrops
	seqNAKs     uint64 // sequence NAKs the requester received
}

// bulk keeps depth WRITEs of msgSize outstanding for warmup + measure,
// each slot of the source restamped before it is posted again, then lets
// them finish and checks that every slot of the destination holds the
// last message written to it.
func bulk(t *testing.T, tp *topo, h *hosts, p *pair) bulkResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), phaseLimit)
	defer cancel()
	clear(h.dst.Buf())
	h.resp.Counters() // orders the clear before the responder's engine writes (see sync)
	path0 := tp.pathDrops(t)
	var res bulkResult
	var seq uint64
	busy := 0
	free := make([]int, 0, depth) // slots whose WRITE completed
	for i := range depth {
		free = append(free, i)
	}
	wc := make([]verbs.WC, 2*depth)
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+measure)
	var bytesIn int64
	for {
		now := time.Now()
		for now.Before(until) && len(free) > 0 {
			slot := free[len(free)-1]
			free = free[:len(free)-1]
			seq++
			stamp(h.src.Buf()[slot*msgSize:][:msgSize], seq)
			wr := verbs.SendWR{ID: uint64(slot), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{h.src.SGE(slot*msgSize, msgSize)}, RemoteAddr: h.dst.Addr() + uint64(slot*msgSize), RKey: h.dst.RKey()}
			if err := p.q.PostSend(&wr); err != nil {
				t.Fatalf("post WRITE: %v", err)
			}
			busy++
		}
		if busy == 0 {
			break
		}
		n, err := p.cq.Wait(ctx, wc)
		if err != nil {
			t.Fatalf("wait with %d WRITEs outstanding: %v", busy, err)
		}
		now = time.Now()
		for _, c := range wc[:n] {
			if c.Status != verbs.WCSuccess || c.Opcode != verbs.WCWrite {
				t.Fatalf("WRITE completion %+v", c)
			}
			busy--
			free = append(free, int(c.WRID))
			if now.After(from) && now.Before(until) {
				bytesIn += msgSize
			}
		}
	}
	res.goodput = float64(bytesIn) / measure.Seconds() / 1e6
	c := p.q.Counters()
	res.retransmits, res.timeouts, res.early, res.seqNAKs = c.Retransmits, c.Timeouts, c.EarlyRetransTimeouts, c.SeqNAKsRcvd
	res.fwd, res.rev = tp.dropped(t)
	res.pathDrops = tp.pathDrops(t).sub(path0)
	// The responder's engine wrote the destination on its own goroutine;
	// a call through it orders those writes before the reads here (the
	// ACKs that told the requester travelled through kernel sockets,
	// which carry no happens-before edge).
	h.resp.Counters()
	for slot := range depth {
		if got, want := h.dst.Buf()[slot*msgSize:][:msgSize], h.src.Buf()[slot*msgSize:][:msgSize]; !bytes.Equal(got, want) {
			t.Errorf("slot %d: the destination differs from the last message written to it (message %d)",
				slot, binary.LittleEndian.Uint64(want)>>32)
		}
	}
	return res
}

// waiter counts one side's completions of a ping-pong, sends and receives
// apart, failing the test on any error status.
type waiter struct {
	cq           *verbs.CQ
	sends, recvs int
	wc           [8]verbs.WC
}

// until waits until at least sends send and recvs receive completions
// have come.
func (w *waiter) until(ctx context.Context, sends, recvs int) error {
	for w.sends < sends || w.recvs < recvs {
		n, err := w.cq.Wait(ctx, w.wc[:])
		if err != nil {
			return fmt.Errorf("wait for %d sends, %d receives (have %d, %d): %w", sends, recvs, w.sends, w.recvs, err)
		}
		for _, c := range w.wc[:n] {
			switch {
			case c.Status != verbs.WCSuccess:
				return fmt.Errorf("completion %+v", c)
			case c.Opcode == verbs.WCSend:
				w.sends++
			case c.Opcode == verbs.WCRecv && c.ByteLen == pingLen:
				w.recvs++
			default:
				return fmt.Errorf("unexpected completion %+v", c)
			}
		}
	}
	return nil
}

// pingPong sends pings 64-byte SENDs from the requester, each echoed by
// the responder, and records each round trip from the ping's PostSend to
// the echo's receive completion. Each side alternates between two receive
// buffers and cycles through pingSends send buffers: a buffer is posted
// again only once its previous WR completed, and every echo must carry
// its ping's bytes.
func pingPong(t *testing.T, h *hosts, p *pair) *hist.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), phaseLimit)
	defer cancel()
	// Buffers: receive 0 and 1, then the sends'.
	recvSGE := func(mr *verbs.MR, i int) []verbs.SGE { return []verbs.SGE{mr.SGE(i%2*pingLen, pingLen)} }
	sendOff := func(i int) int { return (2 + i%pingSends) * pingLen }
	post := func(q *verbs.QueuePair, mr *verbs.MR, i int) error {
		return q.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: recvSGE(mr, i)})
	}
	if err := post(p.rq, h.respPing, 0); err != nil {
		t.Fatal(err)
	}
	echo := make(chan error, 1)
	go func() {
		w := &waiter{cq: p.rcq}
		echo <- func() error {
			b := h.respPing.Buf()
			for i := range pings {
				if err := w.until(ctx, 0, i+1); err != nil {
					return err
				}
				if i+1 < pings {
					if err := post(p.rq, h.respPing, i+1); err != nil {
						return err
					}
				}
				if err := w.until(ctx, i-pingSends+1, 0); err != nil { // the send buffer's last WR
					return err
				}
				copy(b[sendOff(i):][:pingLen], b[i%2*pingLen:][:pingLen])
				wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{h.respPing.SGE(sendOff(i), pingLen)}}
				if err := p.rq.PostSend(&wr); err != nil {
					return err
				}
			}
			return w.until(ctx, pings, pings)
		}()
	}()

	var rtt hist.Histogram
	w := &waiter{cq: p.cq}
	b := h.reqPing.Buf()
	err := func() error {
		if err := post(p.q, h.reqPing, 0); err != nil {
			return err
		}
		for i := range pings {
			if err := w.until(ctx, i-pingSends+1, 0); err != nil {
				return err
			}
			msg := b[sendOff(i):][:pingLen]
			stamp(msg, uint64(i)+1)
			if i+1 < pings {
				if err := post(p.q, h.reqPing, i+1); err != nil {
					return err
				}
			}
			wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{h.reqPing.SGE(sendOff(i), pingLen)}}
			t0 := time.Now()
			if err := p.q.PostSend(&wr); err != nil {
				return err
			}
			if err := w.until(ctx, 0, i+1); err != nil {
				return err
			}
			rtt.RecordDuration(time.Since(t0))
			if !bytes.Equal(b[i%2*pingLen:][:pingLen], msg) {
				return fmt.Errorf("ping %d: the echo differs from the ping", i)
			}
		}
		return w.until(ctx, pings, pings)
	}()
	if err != nil {
		t.Fatalf("requester: %v", err)
	}
	// The responder's last echoes may still wait for their ACKs: one
	// that was lost is sent again when the echo comes again, and only
	// while someone drives the requester's inline device. Left alone,
	// the responder retries into silence and fails its echo with
	// RETRY_EXC_ERR.
	for {
		select {
		case err := <-echo:
			if err != nil {
				t.Fatalf("responder: %v", err)
			}
			var s hist.Snapshot
			rtt.Snapshot(&s)
			return &s
		default:
		}
		wctx, stop := context.WithTimeout(ctx, time.Millisecond)
		n, err := p.cq.Wait(wctx, w.wc[:])
		stop()
		if n > 0 {
			t.Fatalf("requester: completion %+v after the last ping", w.wc[0])
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("requester: %v", err)
		}
	}
}

// cell is one mode at one drop rate in one round.
type cell struct {
	mode  string
	pct   int
	bulk  bulkResult
	rtt   *hist.Snapshot
	clean float64 // the same mode's goodput without loss, in the same round
}

// rounds reads UROCE_LOSSBENCH_ROUNDS (default 1): how many times every
// cell is measured, the cells in the same order each round.
func rounds(t *testing.T) int {
	s := os.Getenv("UROCE_LOSSBENCH_ROUNDS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("UROCE_LOSSBENCH_ROUNDS=%q: want a count of at least 1", s)
	}
	return n
}

// dropRates reads UROCE_LOSSBENCH_PCT ("1,5" by default): the drop
// percentages measured besides the clean run.
func dropRates(t *testing.T) []int {
	s := os.Getenv("UROCE_LOSSBENCH_PCT")
	if s == "" {
		s = "1,5"
	}
	pcts := []int{0}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n >= 100 {
			t.Fatalf("UROCE_LOSSBENCH_PCT=%q: want percentages between 1 and 99, comma-separated", s)
		}
		pcts = append(pcts, n)
	}
	return pcts
}

// TestLossBench runs go-back-N and selective repeat side by side over a
// veth pair and over a shaped dumbbell, clean and at each drop rate, and
// logs one table per link.
//
//	UROCE_LOSSBENCH=1 go test -count=1 -run TestLossBench -v ./tests/lossbench
//
// UROCE_LOSSBENCH_PCT=1,2,5 sets the drop rates (default 1,5), and
// UROCE_LOSSBENCH_ROUNDS=N measures every cell N times in turn.
func TestLossBench(t *testing.T) {
	if os.Getenv("UROCE_LOSSBENCH") == "" {
		t.Skip("the loss benchmark (go-back-N against selective repeat, root, a minute or two) runs only when asked: " +
			"UROCE_LOSSBENCH=1 go test -count=1 -run TestLossBench -v ./tests/lossbench")
	}
	netns.RequireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft not installed (apt-get install -y nftables): %v", err)
	}
	pcts, n := dropRates(t), rounds(t)
	links := []struct {
		name  string
		build func(*testing.T) *topo
	}{{"veth", vethTopo}, {"dumbbell", dumbbellTopo}}
	for _, l := range links {
		t.Run(l.name, func(t *testing.T) { lossBench(t, l.build(t), pcts, n) })
	}
}

// lossBench measures every drop rate and mode on one link, each mode
// right after the other at the same rate, n rounds in turn, and logs the
// link's table. A lossy cell is set against its own round's clean run:
// on a CPU-bound link such as the veth pair, what the machine's other
// work leaves the engines moves goodput by 2x within minutes, far more
// than the loss does, so only rounds taken close together compare.
func lossBench(t *testing.T, tp *topo, pcts []int, n int) {
	h := openHosts(t, tp)
	var cells []cell
	for round := range n {
		cells = append(cells, lossRound(t, tp, h, pcts, round)...)
	}
	tp.setLoss(t, 0)
	t.Log("\n" + table(tp, cells, n))
}

// lossRound measures every drop rate and mode once.
func lossRound(t *testing.T, tp *topo, h *hosts, pcts []int, round int) []cell {
	var cells []cell
	clean := map[string]float64{}
	for _, pct := range pcts {
		for _, m := range modes {
			c := cell{mode: m.name, pct: pct}
			tp.setLoss(t, pct)
			p := h.connect(t, m.retrans)
			c.bulk = bulk(t, tp, h, p)
			p.destroy(t)
			p = h.connect(t, m.retrans)
			c.rtt = pingPong(t, h, p)
			qc, rc := p.q.Counters(), p.rq.Counters()
			p.destroy(t)
			if pct == 0 {
				clean[m.name] = c.bulk.goodput
			}
			c.clean = clean[m.name]
			b := c.bulk
			t.Logf("round %d, %s %d %%: bulk %.1f MB/s, %d dropped by the rules and %+v elsewhere, %d retransmitted, %d timeouts; "+
				"ping-pong timeouts (early) %d (%d) and %d (%d), spurious %d and %d",
				round+1, m.name, pct, b.goodput, b.fwd+b.rev, b.pathDrops, b.retransmits, b.timeouts,
				qc.Timeouts, qc.EarlyRetransTimeouts, rc.Timeouts, rc.EarlyRetransTimeouts, qc.SpuriousRetrans, rc.SpuriousRetrans)
			cells = append(cells, c)
		}
	}
	return cells
}

// median returns the median of vs (the mean of the middle two for an
// even count), sorting vs.
func median(vs []float64) float64 {
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// table renders a link's cells as markdown, one row per mode and drop
// rate: with several rounds, goodput and its share of clean are the
// medians over the rounds (each round's share against that round's clean
// run), the counts are sums and the round trips are merged. The goal
// columns are issue 13's targets for selective repeat: goodput at least
// 0.9 × (1 − loss) of the clean run's, and at most 1.5 retransmitted
// packets per dropped one.
func table(tp *topo, cells []cell, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d KiB WRITEs %d deep for %v (after %v), path MTU %d; %d 64-byte SEND round trips",
		tp.about, msgSize>>10, depth, measure, warmup, pathMTU, pings)
	if rounds > 1 {
		fmt.Fprintf(&b, "; %d rounds in turn, medians of goodput and of each round's share of its clean run (the range in brackets)", rounds)
	}
	b.WriteString("\n\n")
	b.WriteString("| mode | drop | goodput MB/s | ÷ clean | dropped (req/ack) | other drops | retransmitted | ÷ dropped | timeouts (early) | seq NAKs | RTT p50 µs | p99 µs | p99.9 µs | max µs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	us := func(v uint64) string { return fmt.Sprintf("%.0f", float64(v)/1e3) }
	per := len(cells) / rounds
	for i := range per {
		c := cells[i] // the first round's; the rest are summed into it
		var r bulkResult
		var rtt hist.Snapshot
		var goodputs, shares []float64
		for j := i; j < len(cells); j += per {
			o := cells[j].bulk
			goodputs = append(goodputs, o.goodput)
			if cells[j].clean > 0 {
				shares = append(shares, o.goodput/cells[j].clean)
			}
			r.retransmits += o.retransmits
			r.timeouts += o.timeouts
			r.early += o.early
			r.fwd += o.fwd
			r.rev += o.rev
			r.seqNAKs += o.seqNAKs
			r.pathDrops = r.pathDrops.add(o.pathDrops)
			rtt.Merge(cells[j].rtt)
		}
		r.goodput = median(goodputs)
		share, ratio := "-", "-"
		if len(shares) > 0 {
			lo, hi := slices.Min(shares), slices.Max(shares)
			m := median(shares)
			share = fmt.Sprintf("%.3f", m)
			if rounds > 1 && c.pct > 0 {
				share += fmt.Sprintf(" (%.2f–%.2f)", lo, hi)
			}
			if c.pct > 0 {
				mark := "✓"
				if m < 0.9*(1-float64(c.pct)/100) {
					mark = "✗"
				}
				share += " " + mark
			}
		}
		if d := r.fwd + r.rev; d > 0 {
			mark := "✓"
			if float64(r.retransmits) > 1.5*float64(d) {
				mark = "✗"
			}
			ratio = fmt.Sprintf("%.2f %s", float64(r.retransmits)/float64(d), mark)
		}
		fmt.Fprintf(&b, "| %s | %d %% | %.1f | %s | %d (%d/%d) | %d | %d | %s | %d (%d) | %d | %s | %s | %s | %s |\n",
			c.mode, c.pct, r.goodput, share, r.fwd+r.rev, r.fwd, r.rev, r.pathDrops.sum(), r.retransmits, ratio, r.timeouts, r.early, r.seqNAKs,
			us(rtt.Quantile(0.5)), us(rtt.Quantile(0.99)), us(rtt.Quantile(0.999)), us(rtt.Max))
	}
	return b.String()
}
