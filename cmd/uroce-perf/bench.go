package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// bench is the RDMA side of a test over one verbs device, laid out as
// perftest lays out its buffer so that a real perftest peer finds what it
// expects: QP i sends from [i*B, (i+1)*B) and is written, read or sent to
// at [(q+i)*B, (q+i+1)*B), where B is the largest size or the page size,
// whichever is larger (perftest's BUFF_SIZE with cycle_buffer); the
// second half's address is the vaddr in the Dest message.
type bench struct {
	cfg    *config
	dev    *verbs.Device
	server bool
	// conn, when set, is told how to drive the engine while the
	// exchange waits.
	conn *drivingConn

	pd       *verbs.PD
	mr       *verbs.MR
	buf      []byte
	blk      int
	scq, rcq *verbs.CQ
	qps      []*verbs.QueuePair
	// ahs address the peer's QPs with -c UD.
	ahs []*verbs.AH
	// received, when not 0, is how many SENDs recvBW counted before UD
	// lost the rest.
	received int
	mine     []perftest.Dest
	rem      []perftest.Dest
	mtu      perftest.MTU

	wr    verbs.SendWR
	sge   [1]verbs.SGE
	rwr   verbs.RecvWR
	rsge  [1]verbs.SGE
	wc    [16]verbs.WC
	start time.Time
	// progress is when the loop last moved, for the stall detector.
	progress time.Duration
	spins    int
	// With -e, CQ.Wait waits under evCtx, which evTimer cancels after
	// --timeout without a completion: the stall detector of the polling
	// loops. Both are made once, so waiting allocates nothing.
	evCtx    context.Context
	evCancel context.CancelFunc
	evTimer  *time.Timer
}

var _ runner = (*bench)(nil)

func newBench(cfg *config, dev *verbs.Device, server bool) *bench {
	return &bench{cfg: cfg, dev: dev, server: server}
}

// Setup creates PD, MR, CQs and QPs (perftest's ctx_init) and this side's
// Dest messages (set_up_connection: a random 24-bit PSN per QP).
func (b *bench) Setup(sys perftest.SysData) ([]perftest.Dest, error) {
	c := b.cfg
	b.mtu = sys.MTU
	if b.mtu.Bytes() > b.dev.MaxPathMTU() {
		return nil, fmt.Errorf("setup: MTU %d: %w", b.mtu.Bytes(), verbs.ErrMTU)
	}
	gids := b.dev.GIDs()
	if gi := c.deviceGID(); gi < 0 || gi >= len(gids) {
		// openLocal checked it; this catches a device opened elsewhere
		// (the demo, tests).
		return nil, checkGIDIndex(gi, b.dev, "")
	}
	b.blk = max(c.maxSize(), sys.PageSize)
	if c.ud() {
		// A UD receive buffer starts with the GRH's 40 bytes.
		b.blk = max(c.maxSize()+verbs.GRHLen, sys.PageSize)
		c.udMax = b.mtu.Bytes()
	}
	q := c.qps
	b.pd = b.dev.AllocPD()
	var err error
	b.buf = make([]byte, 2*q*b.blk)
	b.mr, err = b.pd.RegMR(b.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	b.scq = b.dev.CreateCQ(q*c.tx + 16)
	b.rcq = b.dev.CreateCQ(q*c.rx + 16)
	if b.conn != nil {
		var none [0]verbs.WC
		b.conn.drive = func() { b.scq.Poll(none[:]) }
		// The link's own counter, read by the goroutine that just
		// drove the engine inline: Device.Counters would hand a
		// closure to the engine, an allocation every few spins.
		b.conn.rx = func() uint64 { return b.dev.Link().Stats().RxPackets }
	}
	rkey := b.mr.RKey()
	if c.kind.verb == verbSend {
		rkey = 0 // perftest's send tests register no remote access
	}
	for i := range q {
		typ := verbs.QPTypeRC
		if c.ud() {
			typ = verbs.QPTypeUD
		} else if c.uc() {
			typ = verbs.QPTypeUC
		}
		qp, err := b.pd.CreateQP(&verbs.QPInit{Type: typ, SendCQ: b.scq, RecvCQ: b.rcq, Cap: verbs.QPCap{
			MaxSendWR: c.tx, MaxRecvWR: c.rx, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: c.inline}})
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		b.qps = append(b.qps, qp)
		d := perftest.Dest{OutReads: c.outReads(), QPN: qp.QPN(), PSN: verbs.RandomPSN(),
			RKey: rkey, VAddr: b.mr.Addr() + uint64((q+i)*b.blk)}
		d.GID = gids[c.deviceGID()].As16()
		b.mine = append(b.mine, d)
	}
	b.start = time.Now()
	return b.mine, nil
}

// Connect takes each QP to RTS toward the peer's (ctx_connect): our SQ
// starts at our PSN, our RQ expects the peer's.
func (b *bench) Connect(remote []perftest.Dest) error {
	b.rem = append(b.rem[:0], remote...)
	for i, qp := range b.qps {
		r := remote[i]
		if b.cfg.ud() {
			// perftest's ctx_connect for UD: the QP to RTS with its
			// PSN and DEF_QKEY, an AH toward the peer's GID; each
			// send names the peer's QPN.
			ah, err := b.pd.CreateAH(verbs.AHAttr{DGID: r.GIDAddr()})
			if err != nil {
				return fmt.Errorf("connect UD QP %#x: %w", qp.QPN(), err)
			}
			if err := qp.ActivateUD(udQKey, b.mine[i].PSN); err != nil {
				return fmt.Errorf("connect UD QP %#x: %w", qp.QPN(), err)
			}
			b.ahs = append(b.ahs, ah)
			continue
		}
		rd := min(r.OutReads, b.mine[i].OutReads, 128)
		ep := verbs.Endpoint{Addr: r.GIDAddr().Unmap(), QPN: r.QPN, PSN: r.PSN}
		if err := qp.Connect(ep, verbs.ConnectOptions{PathMTU: b.mtu.Bytes(), PSN: b.mine[i].PSN, RdAtomic: uint8(max(rd, 1)),
			Timeout: uint8(b.cfg.qpTimeout), Retrans: b.cfg.retrans()}); err != nil {
			return fmt.Errorf("connect QP %#x: %w", qp.QPN(), err)
		}
	}
	b.cfg.srUsed = selectiveOn(b.qps)
	return nil
}

// selectiveOn says whether every QP of qps went to RTS with selective
// repeat, as the QPs themselves have it.
func selectiveOn(qps []*verbs.QueuePair) bool {
	for _, q := range qps {
		if q.Attr().Retrans&verbs.RetransSelective == 0 {
			return false
		}
	}
	return len(qps) > 0
}

// Counters returns the device's counters, summed over the test's QPs.
func (b *bench) Counters() verbs.Counters { return b.dev.Counters() }

func (b *bench) now() time.Duration { return time.Since(b.start) }

// idle is called after a poll that found nothing: it watches for a stalled
// peer and, now and then, yields so that a peer in the same process (the
// demo, the tests) gets the processor on a loaded machine.
func (b *bench) idle() error {
	b.spins++
	if b.spins&63 != 0 {
		return nil
	}
	runtime.Gosched()
	if b.spins&0xffff == 0 && b.now()-b.progress > b.cfg.timeout {
		return fmt.Errorf("%w for %v", ErrStalled, b.cfg.timeout)
	}
	return nil
}

// moved notes progress and returns the clock reading it took.
func (b *bench) moved() time.Duration {
	b.progress = b.now()
	return b.progress
}

// poll moves completions of cq into wc: with -e it waits for at least
// one (perftest's ibv_get_cq_event, then ibv_poll_cq); else it polls once
// and, finding none, runs idle. It returns ErrStalled after --timeout
// without a completion.
func (b *bench) poll(cq *verbs.CQ, wc []verbs.WC) (int, error) {
	if !b.cfg.events {
		n := cq.Poll(wc)
		if n == 0 {
			return 0, b.idle()
		}
		return n, nil
	}
	if b.evTimer == nil {
		b.evCtx, b.evCancel = context.WithCancel(context.Background())
		b.evTimer = time.AfterFunc(b.cfg.timeout, b.evCancel)
	}
	b.evTimer.Reset(b.cfg.timeout)
	n, err := cq.Wait(b.evCtx, wc)
	if !b.evTimer.Stop() && err == nil {
		b.evTimer = nil // it fired as the completion came: a new context
	}
	if errors.Is(err, context.Canceled) {
		return 0, fmt.Errorf("%w for %v", ErrStalled, b.cfg.timeout)
	}
	return n, err
}

// pollOne waits for one completion on cq and checks its status; scnt and
// ccnt are what perftest prints with a failed one.
func (b *bench) pollOne(cq *verbs.CQ, scnt, ccnt int) (verbs.WC, error) {
	for {
		n, err := b.poll(cq, b.wc[:1])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			b.moved()
			wc := b.wc[0]
			if wc.Status != verbs.WCSuccess {
				return wc, &wcError{wc: wc, recv: cq == b.rcq, scnt: scnt, ccnt: ccnt}
			}
			return wc, nil
		}
	}
}

// prepare fills the reusable WR for QP i and a size (ctx_set_send_wqes).
func (b *bench) prepare(i, size int) *verbs.SendWR {
	c := b.cfg
	b.sge[0] = b.mr.SGE(i*b.blk, size)
	b.wr = verbs.SendWR{ID: uint64(i), SGL: b.sge[:], RemoteAddr: b.rem[i].VAddr, RKey: b.rem[i].RKey}
	switch c.kind.verb {
	case verbWrite:
		b.wr.Opcode = verbs.WRWrite
	case verbRead:
		b.wr.Opcode = verbs.WRRead
	case verbSend:
		b.wr.Opcode = verbs.WRSend
	case verbAtomic:
		// perftest's ctx_set_send_wqes: add ATOMIC_ADD_VALUE (1), or
		// compare with 0 and swap in ATOMIC_SWAP_VALUE (0).
		b.wr.Opcode = verbs.WRFetchAdd
		b.wr.CompareAdd = 1
		if c.atomic == atomicCmpSwap {
			b.wr.Opcode = verbs.WRCompareSwap
			b.wr.CompareAdd, b.wr.Swap = 0, 0
		}
	}
	if c.ud() {
		b.wr.AH, b.wr.RemoteQPN, b.wr.RemoteQKey = b.ahs[i], b.rem[i].QPN, udQKey
	}
	if size <= c.inline && (c.kind.verb == verbWrite || c.kind.verb == verbSend) {
		b.wr.Flags |= verbs.SendInline
		b.wr.InlineData = b.buf[i*b.blk : i*b.blk+size]
	}
	return &b.wr
}

// PostRecvs posts the receives of one size on every QP (ctx_set_recv_wqes):
// rx-depth of them, or the iterations if fewer, into the second half.
func (b *bench) PostRecvs(size int) error {
	for i, qp := range b.qps {
		for range min(b.cfg.rx, b.cfg.iters) {
			if err := qp.PostRecv(b.recvWR(i, size)); err != nil {
				return fmt.Errorf("post recv: %w", err)
			}
		}
	}
	return nil
}

func (b *bench) recvWR(i, size int) *verbs.RecvWR {
	if b.cfg.ud() {
		size += verbs.GRHLen // perftest's SIZE(UD, size): the GRH first
	}
	b.rsge[0] = b.mr.SGE((len(b.qps)+i)*b.blk, size)
	b.rwr = verbs.RecvWR{ID: uint64(i), SGL: b.rsge[:]}
	return &b.rwr
}

// Latency runs one latency test of a size on QP 0, as perftest does.
func (b *bench) Latency(size int) (perftest.LatencyReport, error) {
	b.moved()
	if b.cfg.warm > 0 {
		// Untimed first, in the same loop: a virtual machine's first
		// tens of ms after its processors idled run slow.
		if err := b.latency(size, make([]time.Duration, b.cfg.warm), b.cfg.iters); err != nil {
			return perftest.LatencyReport{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	posted := make([]time.Duration, b.cfg.iters)
	if err := b.latency(size, posted, 0); err != nil {
		return perftest.LatencyReport{}, err
	}
	return perftest.Latency(size, posted, b.cfg.kind.roundTrip())
}

// latency runs len(posted) iterations of the test's loop; more follow in
// a later call.
func (b *bench) latency(size int, posted []time.Duration, more int) error {
	switch b.cfg.kind.verb {
	case verbWrite:
		return b.writeLat(size, posted)
	case verbSend:
		return b.sendLat(size, posted, more)
	default:
		return b.requestLat(size, posted)
	}
}

// writeLat is perftest's run_iter_lat_write: each side writes iteration
// n's number into the last byte of the message it writes, and waits for
// the peer's n in the last byte of its own second half before writing
// n+1. The server writes first. The peer's writes make no completion
// here, so polling the (empty) CQ is only what drives the engine.
func (b *bench) writeLat(size int, posted []time.Duration) error {
	iters := len(posted)
	wr := b.prepare(0, size)
	wr.Flags |= verbs.SendSignaled
	postAt := size - 1
	pollAt := len(b.qps)*b.blk + size - 1
	var none [0]verbs.WC
	qp := b.qps[0]
	for scnt, ccnt, rcnt := 0, 0, 0; scnt < iters || ccnt < iters || rcnt < iters; {
		// One clock reading per turn, as perftest's get_cycles before
		// the post: the write that arrived and the post right after it
		// share it.
		now := time.Duration(-1)
		if rcnt < iters && !(scnt < 1 && b.server) {
			rcnt++
			for polled(b.buf, pollAt) != byte(rcnt) {
				b.scq.Poll(none[:])
				if err := b.idle(); err != nil {
					return fmt.Errorf("write_lat: iteration %d: %w", rcnt, err)
				}
			}
			now = b.moved()
		}
		if scnt < iters {
			if now < 0 {
				now = b.now()
			}
			posted[scnt] = now
			scnt++
			b.buf[postAt] = byte(scnt)
			if err := qp.PostSend(wr); err != nil {
				return fmt.Errorf("write_lat: post send: %w", err)
			}
		}
		if ccnt < iters {
			if _, err := b.pollOne(b.scq, scnt, ccnt); err != nil {
				return fmt.Errorf("write_lat: %w", err)
			}
			ccnt++
		}
	}
	return nil
}

// requestLat is perftest's run_iter_lat (read and atomic): post one
// request, wait for its completion, repeat.
func (b *bench) requestLat(size int, posted []time.Duration) error {
	wr := b.prepare(0, size)
	wr.Flags |= verbs.SendSignaled
	qp := b.qps[0]
	for i := range posted {
		posted[i] = b.now()
		if err := qp.PostSend(wr); err != nil {
			return fmt.Errorf("%s: post send: %w", b.cfg.kind.name, err)
		}
		if _, err := b.pollOne(b.scq, i+1, i); err != nil {
			return fmt.Errorf("%s: %w", b.cfg.kind.name, err)
		}
	}
	return nil
}

// sendLat is perftest's run_iter_lat_send: the server waits for a SEND
// before each of its own, the client sends first; a receive is reposted
// while more are to come than are posted, counting the more iterations
// of a later call.
func (b *bench) sendLat(size int, posted []time.Duration, more int) error {
	iters := len(posted)
	wr := b.prepare(0, size)
	wr.Flags |= verbs.SendSignaled
	qp := b.qps[0]
	depth := min(b.cfg.rx, b.cfg.iters) // what PostRecvs posted
	for scnt, rcnt := 0, 0; scnt < iters || rcnt < iters; {
		if rcnt < iters && !(scnt < 1 && !b.server) {
			wc, err := b.pollOne(b.rcq, rcnt, 0)
			if err != nil {
				return fmt.Errorf("send_lat: receive %d: %w", rcnt+1, err)
			}
			rcnt++
			if rcnt+depth <= iters+more {
				if err := qp.PostRecv(b.recvWR(int(wc.WRID), size)); err != nil {
					return fmt.Errorf("send_lat: post recv: %w", err)
				}
			}
		}
		if scnt < iters {
			posted[scnt] = b.now()
			scnt++
			if err := qp.PostSend(wr); err != nil {
				return fmt.Errorf("send_lat: post send: %w", err)
			}
			if _, err := b.pollOne(b.scq, scnt, scnt-1); err != nil {
				return fmt.Errorf("send_lat: %w", err)
			}
		}
	}
	return nil
}

// Bandwidth runs one bandwidth test of a size: the sender's loop, or the
// server's receiving loop in send_bw.
func (b *bench) Bandwidth(size int) (perftest.BandwidthReport, error) {
	r, err := b.bandwidth(size)
	if b.cfg.noPeak {
		r.Peak = 0 // perftest's -N: peak_up is 0
	}
	return r, err
}

func (b *bench) bandwidth(size int) (perftest.BandwidthReport, error) {
	if b.cfg.durationMode() || b.cfg.bidirSend() {
		b.moved()
		return b.stream(size, func(perftest.BandwidthReport) {}, nil)
	}
	total := b.cfg.iters * len(b.qps)
	posted := make([]time.Duration, total)
	completed := make([]time.Duration, total)
	b.moved()
	if b.server && b.cfg.kind.verb == verbSend {
		b.received = 0
		if err := b.recvBW(size, posted, completed); err != nil {
			return perftest.BandwidthReport{}, err
		}
		if n := b.received; n > 0 {
			return b.report(size, posted[:n], completed[:n], 1), nil
		}
		return perQP(b.report(size, posted, completed, 1), b.cfg.iters), nil
	}
	cqMod, err := b.sendBW(size, posted, completed)
	if err != nil {
		return perftest.BandwidthReport{}, err
	}
	return perQP(b.report(size, posted, completed, cqMod), b.cfg.iters), nil
}

// report computes a bandwidth report, with -N without the peak's search.
func (b *bench) report(size int, posted, completed []time.Duration, cqMod int) perftest.BandwidthReport {
	if b.cfg.noPeak {
		return perftest.BandwidthNoPeak(size, posted, completed, b.cfg.gbits)
	}
	return perftest.Bandwidth(size, posted, completed, cqMod, 1, b.cfg.gbits)
}

// perQP reports the iterations per QP, as perftest's #iterations column
// does, while the rates count every QP's messages.
func perQP(r perftest.BandwidthReport, iters int) perftest.BandwidthReport {
	r.Iters = iters
	return r
}

// sendBW is perftest's run_iter_bw: keep up to tx-depth WRs outstanding on
// each QP in turn, signal one in cq-mod (and the last), and stamp each
// post and each signaled completion. It returns the cq-mod used.
func (b *bench) sendBW(size int, posted, completed []time.Duration) (int, error) {
	iters, q := b.cfg.iters, len(b.qps)
	// perftest lowers cq_mod to fit the send queue and the iterations.
	cqMod := min(b.cfg.cqMod, b.cfg.tx, iters)
	scnt := make([]int, q)
	ccnt := make([]int, q)
	wrs := make([]verbs.SendWR, q)
	sges := make([]verbs.SGE, q)
	for i := range q {
		wrs[i] = *b.prepare(i, size)
		sges[i] = b.sge[0]
		wrs[i].SGL = sges[i : i+1]
	}
	totS, totC := 0, 0
	for totC < iters*q {
		for i, qp := range b.qps {
			for scnt[i] < iters && scnt[i]-ccnt[i] < b.cfg.tx {
				wr := &wrs[i]
				wr.Flags &^= verbs.SendSignaled
				// The WR ID carries the QP and how many WRs its
				// completion accounts for.
				if n := scnt[i] + 1; n%cqMod == 0 || n == iters {
					wr.Flags |= verbs.SendSignaled
					covered := n - (n-1)/cqMod*cqMod
					wr.ID = uint64(i)<<32 | uint64(covered)
				}
				posted[totS] = b.now()
				if err := qp.PostSend(wr); err != nil {
					return 0, fmt.Errorf("%s: post send: %w", b.cfg.kind.name, err)
				}
				scnt[i]++
				totS++
			}
		}
		n, err := b.poll(b.scq, b.wc[:])
		if err != nil {
			return 0, fmt.Errorf("%s: %d of %d completed: %w", b.cfg.kind.name, totC, iters*q, err)
		}
		if n == 0 {
			continue
		}
		t := b.now()
		b.moved()
		for _, wc := range b.wc[:n] {
			if wc.Status != verbs.WCSuccess {
				return 0, fmt.Errorf("%s: %w", b.cfg.kind.name, &wcError{wc: wc, scnt: totS, ccnt: totC})
			}
			i, covered := int(wc.WRID>>32), int(wc.WRID&0xffffffff)
			ccnt[i] += covered
			// Every WR the completion accounts for completed now.
			for ; covered > 0; covered-- {
				completed[totC] = t
				totC++
			}
		}
	}
	return cqMod, nil
}

// recvBW is perftest's run_iter_bw_server: count the SENDs that arrive,
// reposting receives while more are to come. Its report runs from the
// first arrival (set_on_first_rx_packet) to each completion.
func (b *bench) recvBW(size int, posted, completed []time.Duration) error {
	total := len(completed)
	depth := min(b.cfg.rx, b.cfg.iters)
	postedPerQP := make([]int, len(b.qps))
	for i := range postedPerQP {
		postedPerQP[i] = depth
	}
	rcnt := 0
	var first time.Duration
	for rcnt < total {
		n, err := b.poll(b.rcq, b.wc[:])
		if err != nil && b.cfg.unreliable() && rcnt > 0 {
			// Datagrams that found no receive, and UC messages that
			// lost a packet, are lost: as perftest's check_alive,
			// end the loop and report what came.
			if b.cfg.notice != nil {
				fmt.Fprintf(b.cfg.notice, "uroce-perf: did not get a message for %v, exiting: total received %d, total iterations required %d\n",
					b.cfg.timeout, rcnt, total)
			}
			b.received = rcnt
			break
		}
		if err != nil {
			return fmt.Errorf("send_bw: %d of %d received: %w", rcnt, total, err)
		}
		if n == 0 {
			continue
		}
		t := b.now()
		b.moved()
		if rcnt == 0 {
			first = t
		}
		for _, wc := range b.wc[:n] {
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("send_bw: %w", &wcError{wc: wc, recv: true, scnt: rcnt})
			}
			completed[rcnt] = t
			rcnt++
			i := int(wc.WRID)
			if postedPerQP[i] < b.cfg.iters {
				if err := b.qps[i].PostRecv(b.recvWR(i, size)); err != nil {
					return fmt.Errorf("send_bw: post recv: %w", err)
				}
				postedPerQP[i]++
			}
		}
	}
	for i := range posted {
		posted[i] = first
	}
	return nil
}
