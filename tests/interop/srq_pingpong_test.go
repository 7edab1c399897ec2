package interop_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
	"github.com/uroce/uroce/verbs"
)

// srqMaxQP is srq_pingpong.c's MAX_QP: its exchange sends that many
// address messages whatever -q says (the unused ones zero).
const srqMaxQP = 256

// srqDest is one QP's address message, srq_pingpong.c's pingpong_dest.
type srqDest struct {
	qpn, psn uint32
	gid      netip.Addr
}

// srqMsgSize is the message, "%04x:%06x:%06x:%s" and its NUL.
const srqMsgSize = 52

func (d srqDest) marshal() []byte {
	m := make([]byte, srqMsgSize)
	var gid [16]byte
	if d.gid.IsValid() {
		gid = d.gid.As16()
	}
	copy(m, fmt.Sprintf("%04x:%06x:%06x:%s", 0, d.qpn, d.psn, hex.EncodeToString(gid[:])))
	return m
}

func parseSRQDest(m []byte) (srqDest, error) {
	s, _, _ := strings.Cut(string(m), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return srqDest{}, fmt.Errorf("malformed address message %q", s)
	}
	qpn, err1 := strconv.ParseUint(f[1], 16, 24)
	psn, err2 := strconv.ParseUint(f[2], 16, 24)
	var gid [16]byte
	_, err3 := hex.Decode(gid[:], []byte(f[3]))
	if err := errors.Join(err1, err2, err3); err != nil {
		return srqDest{}, fmt.Errorf("malformed address message %q: %w", s, err)
	}
	return srqDest{qpn: uint32(qpn), psn: uint32(psn), gid: netip.AddrFrom16(gid)}, nil
}

// readDests reads n messages, then, briefly, any more the peer sends (up
// to max): it reports how many arrived, so that both the exchange
// of srq_pingpong.c that sends MAX_QP messages and one that sends -q are
// met.
func readDests(c net.Conn, n, max int) ([]srqDest, int, error) {
	var out []srqDest
	buf := make([]byte, srqMsgSize)
	for i := 0; i < max; i++ {
		if i >= n {
			c.SetReadDeadline(time.Now().Add(time.Second))
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			if i >= n && isTimeout(err) {
				c.SetReadDeadline(time.Time{})
				return out, i, nil
			}
			return nil, i, fmt.Errorf("read remote address %d: %w", i, err)
		}
		if i < n {
			d, err := parseSRQDest(buf)
			if err != nil {
				return nil, i, err
			}
			out = append(out, d)
		}
	}
	c.SetReadDeadline(time.Time{})
	return out, max, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeDests writes local's messages padded with zero ones to total.
func writeDests(c net.Conn, local []srqDest, from, total int) error {
	for i := from; i < total; i++ {
		var d srqDest
		if i < len(local) {
			d = local[i]
		}
		if _, err := c.Write(d.marshal()); err != nil {
			return fmt.Errorf("send local address %d: %w", i, err)
		}
	}
	return nil
}

// srqPeer is the uroce side of ibv_srq_pingpong: numQP RC QPs sharing one
// SRQ, one buffer that every receive and send uses, and the C program's
// loop, which counts sends and receives over all QPs together.
type srqPeer struct {
	d         *verbs.Device
	pd        *verbs.PD
	mr        *verbs.MR
	cq        *verbs.CQ
	srq       *verbs.SRQ
	qps       []*verbs.QueuePair
	local     []srqDest
	size      int
	depth     int
	rnrBefore uint64
}

func newSRQPeer(d *verbs.Device, numQP, size, depth int) (*srqPeer, error) {
	p := &srqPeer{d: d, pd: d.AllocPD(), size: size, depth: depth}
	var err error
	if p.mr, err = p.pd.RegMR(make([]byte, size), verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	p.cq = d.CreateCQ(depth + numQP)
	if p.srq, err = p.pd.CreateSRQ(verbs.SRQInit{MaxWR: depth, MaxSGE: 1}); err != nil {
		return nil, err
	}
	gid := d.GIDs()[0]
	for range numQP {
		q, err := p.pd.CreateQP(&verbs.QPInit{SendCQ: p.cq, RecvCQ: p.cq, SRQ: p.srq, Cap: verbs.QPCap{MaxSendWR: 1}})
		if err != nil {
			return nil, err
		}
		p.qps = append(p.qps, q)
		p.local = append(p.local, srqDest{qpn: q.QPN(), psn: rand.Uint32() & 0xffffff, gid: gid})
	}
	if n := p.postRecv(depth); n < depth {
		return nil, fmt.Errorf("couldn't post receive (%d)", n)
	}
	return p, nil
}

func (p *srqPeer) postRecv(n int) int {
	wr := verbs.RecvWR{ID: 1, SGL: []verbs.SGE{p.mr.SGE(0, p.size)}}
	for i := range n {
		if p.srq.PostRecv(&wr) != nil {
			return i
		}
	}
	return n
}

// connect connects QP i to remote[i] with srq_pingpong.c's attributes.
func (p *srqPeer) connect(remote []srqDest) error {
	for i, q := range p.qps {
		r := remote[i]
		o := verbs.ConnectOptions{Access: verbs.AccessLocalWrite, PathMTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
			MinRNRTimer: 12, RdAtomic: 1, PSN: p.local[i].psn}
		if err := q.Connect(verbs.Endpoint{Addr: r.gid.Unmap(), QPN: r.qpn, PSN: r.psn}, o); err != nil {
			return fmt.Errorf("QP[%d]: %w", i, err)
		}
	}
	return nil
}

// run is srq_pingpong.c's loop.
func (p *srqPeer) run(ctx context.Context, iters int, client bool) error {
	const recvID, sendID = 1, 2
	pending := make([]int, len(p.qps))
	index := map[uint32]int{}
	send := verbs.SendWR{ID: sendID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.mr.SGE(0, p.size)}}
	for i, q := range p.qps {
		index[q.QPN()] = i
		pending[i] = recvID
		if client {
			if err := q.PostSend(&send); err != nil {
				return err
			}
			pending[i] |= sendID
		}
	}
	routs, rcnt, scnt := p.depth, 0, 0
	wc := make([]verbs.WC, len(p.qps)+p.depth)
	for rcnt < iters || scnt < iters {
		n, err := p.cq.Wait(ctx, wc)
		if err != nil {
			return fmt.Errorf("after %d sends, %d receives: %w", scnt, rcnt, err)
		}
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("failed status %s for wr_id %d", w.Status, w.WRID)
			}
			i, ok := index[w.QPN]
			if !ok {
				return fmt.Errorf("couldn't find QPN %06x", w.QPN)
			}
			switch w.WRID {
			case sendID:
				scnt++
			case recvID:
				if routs--; routs <= len(p.qps) {
					routs += p.postRecv(p.depth - routs)
					if routs < p.depth {
						return fmt.Errorf("couldn't post receive (%d)", routs)
					}
				}
				rcnt++
			}
			pending[i] &^= int(w.WRID)
			if scnt < iters && pending[i] == 0 {
				if err := p.qps[i].PostSend(&send); err != nil {
					return err
				}
				pending[i] = recvID | sendID
			}
		}
	}
	return nil
}

// srqRun is one ibv_srq_pingpong run against the uroce peer.
type srqRun struct {
	uroceClient             bool
	numQP, size, iters, dep int
}

func (r srqRun) String() string {
	side := "uroce-server"
	if r.uroceClient {
		side = "uroce-client"
	}
	return fmt.Sprintf("%s/q%d/s%d", side, r.numQP, r.size)
}

// run runs the uroce peer in the lab's Peer namespace (its sockets opened
// there) against ibv_srq_pingpong -g 1 on g.
func (r srqRun) run(t *testing.T, l *lab.Lab, g *lab.Guest) {
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	guestCmd := fmt.Sprintf("ibv_srq_pingpong -d rxe0 -g 1 -q %d -n %d -s %d -r %d", r.numQP, r.iters, r.size, r.dep)
	before := counters(t, g)[0]
	capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))

	var d *verbs.Device
	var ln net.Listener
	var conn net.Conn
	var job *lab.Job
	if r.uroceClient {
		var err error
		if job, err = g.Start(guestCmd); err != nil {
			t.Fatal(err)
		}
		defer job.Kill()
		if err := g.WaitListen(ctx, perftestPort); err != nil {
			t.Fatal(err)
		}
	}
	err := l.Peer.Do(func() error {
		var err error
		if d, err = verbs.OpenAddr(lab.PeerAddr.Addr(), verbs.Inline()); err != nil {
			return err
		}
		if r.uroceClient {
			var dl net.Dialer
			conn, err = dl.DialContext(ctx, "tcp", net.JoinHostPort(g.Addr.String(), strconv.Itoa(perftestPort)))
			return err
		}
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", perftestPort))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Background mode: the engine keeps answering the guest (ACKs of
	// messages sent after our loop ended) until the test is done.
	d.Start()
	p, err := newSRQPeer(d, r.numQP, r.size, r.dep)
	if err != nil {
		t.Fatal(err)
	}

	var guest lab.Result
	guestDone := make(chan error, 1)
	if !r.uroceClient {
		defer ln.Close()
		go func() {
			var err error
			guest, err = g.Run(ctx, guestCmd+" "+lab.PeerAddr.Addr().String())
			guestDone <- err
		}()
		if conn, err = ln.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	// The exchange: the client writes its messages, reads the server's,
	// writes "done"; the server reads, connects, writes, reads "done".
	var remote []srqDest
	if r.uroceClient {
		if err := writeDests(conn, p.local, 0, r.numQP); err != nil {
			t.Fatal(err)
		}
		// A server that reads MAX_QP messages is silent until it has
		// them all: send the zero ones when no answer comes.
		conn.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		first := make([]byte, srqMsgSize)
		_, err := io.ReadFull(conn, first)
		conn.SetReadDeadline(time.Time{})
		if isTimeout(err) {
			t.Logf("no answer to %d messages: sending all %d", r.numQP, srqMaxQP)
			if err := writeDests(conn, p.local, r.numQP, srqMaxQP); err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadFull(conn, first)
		}
		if err != nil {
			t.Fatalf("read remote address 0: %v", err)
		}
		d0, err := parseSRQDest(first)
		if err != nil {
			t.Fatal(err)
		}
		rest, got, err := readDests(conn, r.numQP-1, srqMaxQP-1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the guest sent %d address messages", got+1)
		remote = append([]srqDest{d0}, rest...)
	} else {
		var got int
		remote, got, err = readDests(conn, r.numQP, srqMaxQP)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the guest sent %d address messages", got)
		if err := p.connect(remote); err != nil {
			t.Fatal(err)
		}
		if err := writeDests(conn, p.local, 0, got); err != nil {
			t.Fatal(err)
		}
		done := make([]byte, 5)
		if _, err := io.ReadFull(conn, done); err != nil || string(done) != "done\x00" {
			t.Fatalf("read done: %q, %v", done, err)
		}
	}
	if r.uroceClient {
		if _, err := conn.Write([]byte("done\x00")); err != nil {
			t.Fatal(err)
		}
		if err := p.connect(remote); err != nil {
			t.Fatal(err)
		}
	}
	runErr := p.run(ctx, r.iters, r.uroceClient)
	if r.uroceClient {
		guest, err = job.Wait(ctx)
	} else {
		err = <-guestDone
	}
	if err != nil {
		t.Fatal(err)
	}
	delta := counters(t, g)[0].Sub(before)
	frames, cerr := capture.Stop()
	stats := lab.VerifyRoCE(frames)
	t.Logf("ibv_srq_pingpong (%s):\n%s%s", g.Name, guest.Stdout, guest.Stderr)
	t.Logf("capture: %v", stats)
	t.Logf("guest hw_counters moved: %v", nonZero(delta))
	if runErr != nil {
		t.Fatalf("uroce: %v", runErr)
	}
	if err := guest.Err(); err != nil {
		t.Fatalf("ibv_srq_pingpong: %v", err)
	}
	if want := fmt.Sprintf("%d iters in", r.iters); !strings.Contains(guest.Stdout, want) {
		t.Errorf("ibv_srq_pingpong's output lacks %q", want)
	}
	if cerr != nil {
		t.Error(cerr)
	}
	if err := stats.Err(); err != nil {
		t.Error(err)
	}
	if stats.Opcodes[bth.RCSendFirst] == 0 && stats.Opcodes[bth.RCSendOnly] == 0 {
		t.Error("no SEND in the capture")
	}
	for _, k := range errorCounters {
		if delta[k] != 0 {
			t.Errorf("guest's %s moved by %d", k, delta[k])
		}
	}
	c := p.srq.Counters()
	var recvs uint64
	for _, q := range p.qps {
		recvs += q.Counters().CompletedRecvs
	}
	// A message the guest sent after uroce's loop ended may hold a WR
	// taken but not completed: at most one per QP.
	if recvs < uint64(r.iters) || c.Taken < recvs || c.Taken > recvs+uint64(r.numQP) {
		t.Errorf("SRQ: %d WRs taken, %d receives completed, want at least %d, and taken at most %d more", c.Taken, recvs, r.iters, r.numQP)
	}
	t.Logf("uroce SRQ %+v, %d receives", c, recvs)
}

// TestSRQPingpongRxe runs ibv_srq_pingpong on an rxe guest against a uroce
// peer with the same QPs, SRQ and loop, each side as client and server:
// 16 RC QPs per side, every receive from one shared receive queue,
// messages of four packets. Both loops must finish, the capture verify and
// the guest's error counters stay still.
func TestSRQPingpongRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	g := l.Boot(lab.GuestConfig{})[0]
	for _, uroceClient := range []bool{true, false} {
		r := srqRun{uroceClient: uroceClient, numQP: 16, size: 4096, iters: 200, dep: 64}
		t.Run(r.String(), func(t *testing.T) { r.run(t, l, g) })
	}
}
