package cm_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// fabric is an in-memory QP1 network between CM nodes: a fake clock, a
// fixed one-way delay, and seeded loss and duplication. Nothing in it
// reads the wall clock.
type fabric struct {
	t      testing.TB
	now    time.Time
	rng    *rand.Rand
	loss   float64 // probability a datagram is lost
	dup    float64 // probability it arrives twice (the copy later)
	delay  time.Duration
	queue  []datagram
	nodes  []*node
	seq    int
	sent   []datagram            // every datagram sent, lost ones too
	filter func(d datagram) bool // when it returns false, the datagram is lost
}

type datagram struct {
	at       time.Time
	seq      int
	from, to mad.GID
	b        []byte
}

func (d datagram) attr() mad.AttrID { return mad.MAD(d.b).Header().AttrID() }

func (d datagram) String() string {
	return fmt.Sprintf("%v %v->%v", d.attr(), d.from, d.to)
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newFabric(t testing.TB, seed uint64) *fabric {
	return &fabric{t: t, now: epoch, rng: rand.New(rand.NewPCG(seed, 7)), delay: 10 * time.Microsecond}
}

// node is one CM with a fake QP and an application policy.
type node struct {
	f      *fabric
	gid    mad.GID
	m      *cm.Manager
	qp     fakeQP
	events []cm.Event
	// onRequest is the application's answer to a connect request, and
	// onSIDR to a SIDR_REQ; nil leaves it unanswered.
	onRequest func(c *cm.Conn)
	onSIDR    func(s *cm.SIDR)
	qpn, psn  uint32
}

// fakeQP records Modify QP calls and can fail one.
type fakeQP struct {
	calls []qpCall
	fail  cm.QPState
}

type qpCall struct {
	to   cm.QPState
	attr cm.QPAttr
}

var errQP = errors.New("modify QP failed")

func (q *fakeQP) ModifyQP(_ time.Time, to cm.QPState, a *cm.QPAttr) error {
	q.calls = append(q.calls, qpCall{to, *a})
	if to == q.fail {
		return errQP
	}
	return nil
}

func (q *fakeQP) last() cm.QPState {
	if len(q.calls) == 0 {
		return 0
	}
	return q.calls[len(q.calls)-1].to
}

type sender struct{ n *node }

func (s sender) SendMAD(dst cm.Address, b []byte) error {
	f := s.n.f
	if dst.QPN != mad.GSIQPN || dst.QKey != mad.GSIQKey || len(b) != mad.Size {
		f.t.Errorf("SendMAD to %+v, %d bytes", dst, len(b))
	}
	d := datagram{at: f.now.Add(f.delay), from: s.n.gid, to: dst.GID, b: bytes.Clone(b)}
	f.seq++
	d.seq = f.seq
	f.sent = append(f.sent, d)
	if f.filter != nil && !f.filter(d) {
		return nil
	}
	if f.rng.Float64() < f.loss {
		return nil
	}
	f.queue = append(f.queue, d)
	if f.rng.Float64() < f.dup {
		d2 := d
		f.seq++
		d2.seq = f.seq
		d2.at = d.at.Add(time.Duration(f.rng.IntN(5000)) * time.Millisecond)
		f.queue = append(f.queue, d2)
	}
	return nil
}

func (f *fabric) addNode(name string, cfg cm.Config) *node {
	n := &node{f: f, gid: mad.GIDFromAddr(netip.MustParseAddr(name))}
	cfg.GID = n.gid
	cfg.Send = sender{n}
	cfg.QP = &n.qp
	if cfg.Seed == 0 {
		cfg.Seed = uint64(len(f.nodes) + 1)
	}
	if cfg.CAGUID == 0 {
		cfg.CAGUID = 0x505400fffe770000 | uint64(len(f.nodes)+1)
	}
	m, err := cm.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	n.m = m
	n.qpn, n.psn = 0x100+uint32(len(f.nodes)), 0x1000*uint32(len(f.nodes)+1)
	f.nodes = append(f.nodes, n)
	return n
}

func (f *fabric) node(g mad.GID) *node {
	for _, n := range f.nodes {
		if n.gid == g {
			return n
		}
	}
	return nil
}

// step advances the clock to the next delivery or timer, if it is not
// after end, and runs it. It returns false when nothing is pending by end.
func (f *fabric) step(end time.Time) bool {
	next := time.Time{}
	for _, d := range f.queue {
		if next.IsZero() || d.at.Before(next) {
			next = d.at
		}
	}
	for _, n := range f.nodes {
		if t, ok := n.m.NextDeadline(); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() {
		return false
	}
	if next.After(end) {
		f.now = end
		return false
	}
	f.now = next
	// Deliver what is due, in send order.
	slices.SortStableFunc(f.queue, func(a, b datagram) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for len(f.queue) > 0 && !f.queue[0].at.After(f.now) {
		d := f.queue[0]
		f.queue = f.queue[1:]
		if n := f.node(d.to); n != nil {
			_ = n.m.HandleMAD(f.now, cm.Address{GID: d.from, QPN: mad.GSIQPN, QKey: mad.GSIQKey, PKey: 0xffff}, d.b)
			n.drain()
		}
	}
	for _, n := range f.nodes {
		n.m.Tick(f.now)
		n.drain()
	}
	return true
}

// drain collects the node's events and runs the application policy.
func (n *node) drain() {
	for _, e := range n.m.PollEvents(nil) {
		n.events = append(n.events, e)
		if e.Type == cm.EventConnectRequest && e.SIDR != nil {
			if n.onSIDR != nil {
				n.onSIDR(e.SIDR)
			}
			continue
		}
		if e.Type == cm.EventConnectRequest && n.onRequest != nil {
			n.onRequest(e.Conn)
			// Accepting or rejecting makes no events of its own, but
			// keep draining in case a policy does more.
		}
	}
}

// run steps until cond holds or nothing is pending, or the simulated
// time limit passes (a bound on simulated time, not on the test's).
func (f *fabric) run(limit time.Duration, cond func() bool) {
	f.t.Helper()
	end := f.now.Add(limit)
	for (cond == nil || !cond()) && f.now.Before(end) {
		if !f.step(end) {
			break
		}
	}
}

// accept is the usual application: accept with the node's QP.
func (n *node) accept(rr, id uint8) func(c *cm.Conn) {
	return func(c *cm.Conn) {
		err := c.Accept(n.f.now, &cm.AcceptParams{QPN: n.qpn, StartingPSN: n.psn, ResponderResources: rr, InitiatorDepth: id, RNRRetryCount: 7})
		if err != nil {
			n.f.t.Errorf("accept: %v", err)
		}
	}
}

const service = 0x0000000001061c06 // rdma_cm, TCP port 7174

func (n *node) connect(to *node, pd []byte) *cm.Conn {
	n.f.t.Helper()
	c, err := n.m.Connect(n.f.now, &cm.ConnectParams{
		ServiceID: service, Dest: to.gid, QPN: n.qpn, StartingPSN: n.psn, PathMTU: mad.MTU1024,
		ResponderResources: 4, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7, PrivateData: pd,
	})
	if err != nil {
		n.f.t.Fatal(err)
	}
	return c
}

func (n *node) has(t cm.EventType) bool { return n.count(t) > 0 }

func (n *node) count(t cm.EventType) int {
	k := 0
	for _, e := range n.events {
		if e.Type == t {
			k++
		}
	}
	return k
}

func (n *node) types() []cm.EventType {
	var ts []cm.EventType
	for _, e := range n.events {
		ts = append(ts, e.Type)
	}
	return ts
}

func (f *fabric) countSent(attr mad.AttrID) int {
	k := 0
	for _, d := range f.sent {
		if d.attr() == attr {
			k++
		}
	}
	return k
}

// checkAttrs checks that the two ends' QP attributes describe one
// connection.
func checkAttrs(t testing.TB, a, b *node, ca, cb *cm.Conn) {
	t.Helper()
	x, y := ca.Attr(), cb.Attr()
	if x.QPN != a.qpn || y.QPN != b.qpn || x.DestQPN != b.qpn || y.DestQPN != a.qpn {
		t.Errorf("QPNs: %#x->%#x, %#x->%#x", x.QPN, x.DestQPN, y.QPN, y.DestQPN)
	}
	// A side's Starting PSN is the one it receives first.
	if x.SQPSN != y.RQPSN || y.SQPSN != x.RQPSN || x.RQPSN != a.psn || y.RQPSN != b.psn {
		t.Errorf("PSNs: %#x/%#x, %#x/%#x", x.SQPSN, x.RQPSN, y.SQPSN, y.RQPSN)
	}
	if x.DestGID != b.gid || y.DestGID != a.gid || x.SrcGID != a.gid || y.SrcGID != b.gid {
		t.Errorf("GIDs: %v->%v, %v->%v", x.SrcGID, x.DestGID, y.SrcGID, y.DestGID)
	}
	if x.PathMTU != y.PathMTU || x.RetryCount != y.RetryCount || x.MaxRdAtomic > y.MaxDestRdAtomic || y.MaxRdAtomic > x.MaxDestRdAtomic {
		t.Errorf("terms differ:\n%+v\n%+v", x, y)
	}
}
