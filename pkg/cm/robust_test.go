package cm_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// TestLossyConnectDisconnect runs connect and disconnect over a fabric
// that loses a fifth of the datagrams and duplicates a fifth (copies up
// to 5 s late), for many seeds: every run ends with one connection that
// both sides agree on, established once, disconnected once, and nothing
// left over; duplicates in between change nothing.
func TestLossyConnectDisconnect(t *testing.T) {
	for seed := range uint64(300) {
		f, a, b := pair(t, seed)
		f.loss, f.dup = 0.2, 0.2
		ca := a.connect(b, nil)
		f.run(24*time.Hour, func() bool { return a.has(cm.EventEstablished) && b.has(cm.EventEstablished) })
		if !a.has(cm.EventEstablished) || !b.has(cm.EventEstablished) {
			t.Fatalf("seed %d: not established: %v %v", seed, a.types(), b.types())
		}
		cb := b.events[0].Conn
		checkAttrs(t, a, b, ca, cb)
		// Let every late copy arrive.
		f.run(30*time.Second, nil)
		if ca.State() != cm.StateEstablished || cb.State() != cm.StateEstablished {
			t.Fatalf("seed %d: broken by duplicates: %v %v", seed, ca.State(), cb.State())
		}
		if !slices.Equal(a.types(), []cm.EventType{cm.EventEstablished}) ||
			!slices.Equal(b.types(), []cm.EventType{cm.EventConnectRequest, cm.EventEstablished}) {
			t.Fatalf("seed %d: events %v %v", seed, a.types(), b.types())
		}
		who := ca
		if seed%2 == 1 {
			who = cb
		}
		if err := who.Disconnect(f.now, nil); err != nil {
			t.Fatal(err)
		}
		f.run(24*time.Hour, nil)
		want := []cm.EventType{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}
		if !slices.Equal(a.types(), want) || !slices.Equal(b.types()[1:], want) {
			t.Fatalf("seed %d: events %v %v", seed, a.types(), b.types())
		}
		if a.m.NumConns() != 0 || b.m.NumConns() != 0 {
			t.Fatalf("seed %d: %d and %d connections left", seed, a.m.NumConns(), b.m.NumConns())
		}
	}
}

// TestLossyReject: the REJ reaches the active side however many copies
// are lost, and the application is asked once.
func TestLossyReject(t *testing.T) {
	for seed := range uint64(100) {
		f, a, b := pair(t, seed)
		f.loss, f.dup = 0.3, 0.2
		asked := 0
		b.onRequest = func(c *cm.Conn) {
			asked++
			c.Reject(f.now, mad.RejConsumerDefined, nil)
		}
		a.connect(b, nil)
		f.run(24*time.Hour, nil)
		if asked != 1 && !(asked == 0 && a.has(cm.EventUnreachable)) {
			t.Fatalf("seed %d: asked %d times", seed, asked)
		}
		if len(a.events) != 1 || (a.events[0].Type != cm.EventRejected && a.events[0].Type != cm.EventUnreachable) {
			t.Fatalf("seed %d: events %v", seed, a.events)
		}
	}
}

// TestGarbageKeepsEstablished replays every message of a connection,
// truncated, with a bit flipped, and with header fields changed, to both
// ends of an established connection: nothing changes and nothing
// panics.
func TestGarbageKeepsEstablished(t *testing.T) {
	f, a, b := pair(t, 20)
	ca := a.connect(b, nil)
	cb := established(t, f, a, b, ca)
	rng := rand.New(rand.NewPCG(3, 4))
	var inputs [][]byte
	for _, d := range f.sent {
		inputs = append(inputs, d.b, d.b[:rng.IntN(len(d.b))], append(bytes.Clone(d.b), 0))
		for range 50 {
			x := bytes.Clone(d.b)
			i := rng.IntN(len(x))
			x[i] ^= 1 << rng.IntN(8)
			inputs = append(inputs, x)
		}
		for _, off := range []int{0, 1, 2, 3, 17} {
			x := bytes.Clone(d.b)
			x[off] ^= 0x40
			inputs = append(inputs, x)
		}
	}
	for _, junk := range [][]byte{nil, {}, make([]byte, mad.Size), bytes.Repeat([]byte{0xff}, mad.Size)} {
		inputs = append(inputs, junk)
	}
	a.events, b.events = nil, nil
	for _, in := range inputs {
		for _, n := range []*node{a, b} {
			peer := a
			if n == a {
				peer = b
			}
			n.m.HandleMAD(f.now, cm.Address{GID: peer.gid, QPN: 1, QKey: mad.GSIQKey}, in)
			n.drain()
		}
		f.run(time.Millisecond, nil)
	}
	f.run(time.Minute, nil)
	if ca.State() != cm.StateEstablished || cb.State() != cm.StateEstablished || len(a.events)+len(b.events) != 0 {
		t.Fatalf("after %d bad MADs: %v %v, events %v %v", len(inputs), ca.State(), cb.State(), a.events, b.events)
	}
	if a.m.Counters.Malformed == 0 || b.m.Counters.Dropped == 0 {
		t.Errorf("counters %+v %+v", a.m.Counters, b.m.Counters)
	}
}

// FuzzHandleMAD feeds arbitrary datagrams to both ends of an established
// connection and to a listener: no panic, and every connection stays in
// a state of the diagrams.
func FuzzHandleMAD(f *testing.F) {
	{
		fab := newFabric(f, 1)
		a := fab.addNode("10.77.0.12", cm.Config{})
		b := fab.addNode("10.77.0.11", cm.Config{})
		b.m.Listen(service)
		b.onRequest = b.accept(1, 1)
		c := a.connect(b, nil)
		fab.run(time.Hour, nil)
		c.Disconnect(fab.now, nil)
		fab.run(time.Hour, nil)
		for _, d := range fab.sent {
			f.Add(d.b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fab := newFabric(t, 1)
		a := fab.addNode("10.77.0.12", cm.Config{})
		b := fab.addNode("10.77.0.11", cm.Config{})
		b.m.Listen(service)
		b.onRequest = b.accept(1, 1)
		c := a.connect(b, nil)
		fab.run(time.Hour, func() bool { return c.State() == cm.StateEstablished && b.has(cm.EventEstablished) })
		for _, n := range []*node{a, b} {
			peer := a
			if n == a {
				peer = b
			}
			n.m.HandleMAD(fab.now, cm.Address{GID: peer.gid, QPN: 1, QKey: mad.GSIQKey}, in)
			n.drain()
		}
		fab.run(time.Hour, nil)
		for _, n := range []*node{a, b} {
			for _, e := range n.events {
				if e.Conn != nil && e.Conn.State() > cm.StateTimewait {
					t.Fatalf("state %v", e.Conn.State())
				}
			}
		}
	})
}
