package rc_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// gsiQKey is QP1's Q_Key (IBA 13.4.6.2.4), which every CM datagram
// carries.
const gsiQKey = 0x80010000

// TestHostileCM plays an attacker against an rdma_cm connection between
// two namespaces (issue 16): from another address on the active side's
// host, the CM messages that would end or confuse the connection (DREQ,
// REJ, RTU, DREP, MRA) with the connection's own communication IDs, then
// the same with guessed ones, and a flood of REJs and DREQs for
// connections that do not exist. The CM drops each and counts it; the
// connection stays established and carries data both ways.
func TestHostileCM(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, netns.PairConfig{
		A: []netip.Prefix{netip.MustParsePrefix("10.97.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.97.0.2/24")},
	})
	attacker := netip.MustParseAddr("10.97.0.66")
	p.B.AddAddr(t, netip.PrefixFrom(attacker, 24))
	a, b := open(t, p.A.NS, p.AddrA), open(t, p.B.NS, p.AddrB)
	a.d.Start()
	b.d.Start()
	ma, err := rdmacm.Open(a.d, rdmacm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ma.Close() })
	mb, err := rdmacm.Open(b.d, rdmacm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// B dials A's listener.
	l, err := ma.Listen(7471)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		c, err := req.Accept(ctx, a.q, nil)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	cb, err := mb.Dial(ctx, netip.AddrPortFrom(p.AddrA, 7471), b.q, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := <-accepted
	if ca == nil {
		t.FailNow()
	}
	aID, bID := ca.CommIDs()
	if id, _ := cb.CommIDs(); id != bID {
		t.Fatalf("comm IDs: A has %#x/%#x, B's own is %#x", aID, bID, id)
	}

	// Every message is a UD SEND to A's QP1 from QP1 of the attacker's
	// address, as a CM on that host would send it.
	f := newForger(t, p.B.NS, attacker, p.AddrA)
	psn := uint32(0)
	before := ma.Counters()
	sent := 0
	// One at a time, each once A's CM has taken the one before: QP1 has
	// a few receives posted, and a datagram that finds none is dropped
	// (UD has no RNR), which would test nothing.
	send := func(m mad.MAD) {
		t.Helper()
		psn++
		f.send(t, &bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.UDSendOnly, DestQP: 1, PKey: 0xffff, PSN: bth.PSN(psn)},
			DETH: bth.DETHFields{QKey: gsiQKey, SrcQP: 1}}, m)
		sent++
		if got := waitCounter(func() uint64 { return ma.Counters().MADsIn - before.MADsIn }, uint64(sent)); got < uint64(sent) {
			t.Fatalf("A's CM received %d of the %d forged MADs", got, sent)
		}
	}
	forge := func(attr mad.AttrID, local, remote uint32) mad.MAD {
		m := mad.NewCM(make([]byte, mad.Size), attr, uint64(local)<<8)
		switch attr {
		case mad.AttrDREQ:
			m.DREQ().Encode(&mad.DREQFields{LocalCommID: local, RemoteCommID: remote, RemoteQPN: a.q.QPN()})
		case mad.AttrREJ:
			m.REJ().Encode(&mad.REJFields{LocalCommID: local, RemoteCommID: remote, Reason: mad.RejStaleConn})
		case mad.AttrRTU:
			m.RTU().Encode(&mad.CommIDsFields{LocalCommID: local, RemoteCommID: remote})
		case mad.AttrDREP:
			m.DREP().Encode(&mad.CommIDsFields{LocalCommID: local, RemoteCommID: remote})
		case mad.AttrMRA:
			m.MRA().Encode(&mad.MRAFields{LocalCommID: local, RemoteCommID: remote})
		}
		return m
	}
	// The connection's own IDs, from an address that is not its peer's.
	for _, attr := range []mad.AttrID{mad.AttrDREQ, mad.AttrREJ, mad.AttrRTU, mad.AttrDREP, mad.AttrMRA} {
		send(forge(attr, bID, aID))
	}
	// Guessed IDs: REJs and DREQs for connections A does not have. A
	// DREQ for no connection is answered with a DREP, as ib_cm does (the
	// DREP of a finished connection was lost); it changes nothing.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 256 {
		send(forge(mad.AttrREJ, rng.Uint32(), rng.Uint32()))
		send(forge(mad.AttrDREQ, rng.Uint32(), aID^(rng.Uint32()|1)))
	}
	// Every one but the answered DREQs was dropped.
	after := ma.Counters()
	if d := after.Dropped - before.Dropped; d < uint64(5+256) {
		t.Errorf("A's CM dropped %d forged MADs, want at least %d (the connection's 5 and 256 REJs)", d, 5+256)
	}
	t.Logf("A's CM: %d forged MADs in, %d dropped, %d malformed", after.MADsIn-before.MADsIn, after.Dropped-before.Dropped, after.Malformed-before.Malformed)

	// The connection is still up, with no event, and carries data both
	// ways.
	for _, c := range []*rdmacm.Conn{ca, cb} {
		select {
		case e := <-c.Events():
			if e.Type != rdmacm.EventEstablished {
				t.Errorf("event %v after the forged MADs", e)
			}
		default:
		}
		if s := c.QP().State(); s != verbs.StateRTS {
			t.Errorf("QP %#x in %v after the forged MADs, want RTS", c.QP().QPN(), s)
		}
	}
	fill(b.mr.Buf(), 7)
	if err := b.q.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, 4096),
		RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := b.next(ctx, t, "WRITE after the forged MADs"); wc.Status != verbs.WCSuccess {
		t.Fatalf("WRITE after the forged MADs: %v", wc.Status)
	}
	a.sync()
	if got := a.mr.Buf()[:4096]; string(got) != string(b.mr.Buf()[:4096]) {
		t.Error("the WRITE after the forged MADs landed wrong")
	}
	if err := cb.Disconnect(); err != nil {
		t.Fatal(err)
	}
}
