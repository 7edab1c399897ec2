package rdmacm

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// TestDuplicatedAndLostMADs: connections come up, carry data and go down
// when every MAD arrives twice, or the first REP, RTU or DREP is lost.
func TestDuplicatedAndLostMADs(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop mad.AttrID // the first one is lost
		dup  bool
	}{
		{name: "every MAD twice", dup: true},
		{name: "first REP lost", drop: mad.AttrREP},
		{name: "first RTU lost", drop: mad.AttrRTU},
		{name: "first DREP lost", drop: mad.AttrDREP},
		{name: "first DREQ lost", drop: mad.AttrDREQ},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, h := pipePair(t, fastCM)
			dropped := false
			h.setFilter(func(_, _ mad.GID, m mad.MAD) int {
				if tc.dup {
					return 2
				}
				if !dropped && m.Header().AttrID() == tc.drop {
					dropped = true
					return 0
				}
				return 1
			})
			ca, cb := connect(t, a, b, 7174, nil, nil)
			exchange(t, a, b, ca, cb)
			if err := ca.Disconnect(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*Conn{ca, cb} {
				expectEvents(t, c, EventEstablished, EventDisconnected, EventTimewaitExit)
			}
			if tc.drop != 0 && !dropped {
				t.Errorf("no %v was sent", tc.drop)
			}
			if tc.dup && b.cm.Counters().Duplicates == 0 {
				t.Error("duplicates not counted")
			}
		})
	}
}

// TestDuplicateREQ: a REQ repeated while the application has not yet
// answered gets an MRA (and the application sees one request); once it
// accepted, the REP again (IBA 12.9.6, passive side).
func TestDuplicateREQ(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	// Hold the RTU back, so the passive side stays in REP Sent.
	h.setFilter(func(_, _ mad.GID, m mad.MAD) int {
		if m.Header().AttrID() == mad.AttrRTU {
			return 0
		}
		return 1
	})
	l, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	dialed := make(chan error, 1)
	go func() {
		_, err := a.cm.Dial(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), a.qp(t), nil)
		dialed <- err
	}()
	req, err := l.Accept(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	reqMAD := h.sentOf(mad.AttrREQ)[0]
	h.inject(a.dev.Addr(), b.dev.Addr(), reqMAD)
	waitFor(t, func() bool { return len(h.sentOf(mad.AttrMRA)) == 1 })
	c, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if r, err := l.Accept(c); err == nil {
		t.Fatalf("a repeated REQ became a second request from %v", r.Remote)
	}

	accepted := make(chan error, 1)
	go func() {
		_, err := req.Accept(ctx(t), b.qp(t), nil)
		accepted <- err
	}()
	if err := <-dialed; err != nil {
		t.Fatalf("dial: %v", err)
	}
	n := len(h.sentOf(mad.AttrREP))
	h.inject(a.dev.Addr(), b.dev.Addr(), reqMAD)
	waitFor(t, func() bool { return len(h.sentOf(mad.AttrREP)) > n })
	// Let the RTU through: the next REP retry's answer establishes.
	h.setFilter(nil)
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
}

// TestBadMADsKeepConnection: malformed, truncated, unexpected and
// misaddressed MADs arriving at both sides of an established connection
// change nothing: no event, the QPs stay in RTS, data still flows.
func TestBadMADsKeepConnection(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	ca, cb := connect(t, a, b, 7174, nil, nil)
	expectEvents(t, ca, EventEstablished)
	expectEvents(t, cb, EventEstablished)

	stranger := netip.MustParseAddr("10.0.0.99")
	rng := rand.New(rand.NewPCG(1, 2))
	var junk [][]byte
	for range 50 {
		b := make([]byte, mad.Size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		junk = append(junk, b)
	}
	// Real messages with a bit flipped in the CM fields: some name the
	// connection, most do not.
	for _, attr := range []mad.AttrID{mad.AttrREQ, mad.AttrREP, mad.AttrRTU} {
		for _, m := range h.sentOf(attr) {
			for bit := 24 * 8; bit < 64*8; bit += 37 {
				c := append([]byte(nil), m...)
				c[bit/8] ^= 1 << (bit % 8)
				junk = append(junk, c)
			}
			junk = append(junk, m, m[:mad.HeaderLen+3])
		}
	}
	junk = append(junk, nil, []byte{1}, make([]byte, mad.Size), make([]byte, 1024))
	// A DREQ that names the connections but comes from a stranger.
	dreq := make([]byte, mad.Size)
	m := mad.NewCM(dreq, mad.AttrDREQ, 7)
	m.DREQ().Encode(&mad.DREQFields{LocalCommID: ca.ccRemoteID(t), RemoteCommID: cb.ccLocalID(t), RemoteQPN: cb.QP().QPN()})
	for _, j := range junk {
		h.inject(a.dev.Addr(), b.dev.Addr(), j)
		h.inject(b.dev.Addr(), a.dev.Addr(), j)
		h.inject(stranger, a.dev.Addr(), j)
	}
	h.inject(stranger, b.dev.Addr(), dreq)
	// Wait until both loops have taken in everything injected.
	waitFor(t, func() bool {
		return a.cm.Counters().MADsIn >= uint64(2*len(junk)) && b.cm.Counters().MADsIn >= uint64(len(junk)+1)
	})
	for _, c := range []*Conn{ca, cb} {
		select {
		case e := <-c.Events():
			t.Fatalf("event %v after bad MADs", e.Type)
		case <-c.Done():
			t.Fatal("disconnected by bad MADs")
		default:
		}
		if s := c.QP().State(); s != verbs.StateRTS {
			t.Fatalf("QP in %v after bad MADs", s)
		}
	}
	exchange(t, a, b, ca, cb)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

// ccLocalID and ccRemoteID read the state machine's IDs on the loop.
func (c *Conn) ccLocalID(t *testing.T) (id uint32) {
	if err := c.m.do(func(time.Time) { id = c.cc.LocalID() }); err != nil {
		t.Fatal(err)
	}
	return id
}

func (c *Conn) ccRemoteID(t *testing.T) (id uint32) {
	if err := c.m.do(func(time.Time) { id = c.cc.RemoteID() }); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestFirstDataIsRTU: with every RTU lost, the passive side's connection
// is established by the first packet its QP receives (IBA 12.9.6), so
// Accept returns rather than running out of REP retries.
func TestFirstDataIsRTU(t *testing.T) {
	cfg := fastCM
	cfg.CM.CMResponseTimeout = 16 // 268 ms: the data, not a retry, must settle it
	a, b, h := pipePair(t, cfg)
	h.setFilter(func(_, _ mad.GID, m mad.MAD) int {
		if m.Header().AttrID() == mad.AttrRTU {
			return 0
		}
		return 1
	})
	l, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	qb := b.qp(t)
	if err := InitQP(qb, 0); err != nil {
		t.Fatal(err)
	}
	if err := qb.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 256)}}); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx(t))
		if err == nil {
			_, err = req.Accept(ctx(t), qb, nil)
		}
		accepted <- err
	}()
	ca, err := a.cm.Dial(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), a.qp(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.QP().PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: []byte("rtu")}); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	if n := len(h.sentOf(mad.AttrRTU)); n == 0 {
		t.Error("no RTU was sent (and lost)")
	}
	if w := b.wc(t); w.Status != verbs.WCSuccess || w.ByteLen != 3 {
		t.Errorf("receive %+v", w)
	}
}
