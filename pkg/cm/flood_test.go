package cm_test

import (
	"net/netip"
	"testing"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// TestREQFlood: forged REQs from ever new communication IDs and sources
// make connections up to MaxConns; beyond it each is rejected with "no
// resources", keeps no state and is counted, and a REQ for a connection
// the manager holds is still answered from its state.
func TestREQFlood(t *testing.T) {
	const limit = 8
	caps := rpingMADs(t)
	n := &capNode{}
	m, err := cm.New(cm.Config{GID: g1, CAGUID: 0x505400fffe77000b, Send: n, QP: &n.qp, Seed: 42, MaxConns: limit})
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	m.Listen(mad.IPServiceID(mad.PortSpaceTCP, 7174))
	const flood = 1000
	for i := range flood {
		src := cm.Address{GID: mad.GIDFromAddr(netip.AddrFrom4([4]byte{10, 66, byte(i >> 8), byte(i)})), QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
		if err := m.HandleMAD(epoch, src, patch(caps[0], uint64(i+1), uint32(i+1), 0)); err != nil {
			t.Fatalf("REQ %d: %v", i, err)
		}
	}
	if got := m.NumConns(); got != limit {
		t.Fatalf("%d connections after %d REQs, want %d", got, flood, limit)
	}
	if got := m.Counters.Overloaded; got != flood-limit {
		t.Errorf("overloaded %d, want %d", got, flood-limit)
	}
	if ev := m.PollEvents(nil); len(ev) != limit {
		t.Errorf("%d connect requests, want %d", len(ev), limit)
	}
	if len(n.sent) != flood-limit {
		t.Fatalf("%d MADs sent, want a REJ for each of %d", len(n.sent), flood-limit)
	}
	for _, b := range n.sent {
		if mad.MAD(b).Header().AttrID() != mad.AttrREJ || mad.MAD(b).REJ().Reason() != mad.RejNoResources {
			t.Fatalf("sent %v, want REJ no resources", mad.MAD(b).Header().AttrID())
		}
	}
	// The first source's REQ again: a duplicate of a connection held,
	// answered with an MRA, not rejected.
	n.sent = nil
	first := cm.Address{GID: mad.GIDFromAddr(netip.AddrFrom4([4]byte{10, 66, 0, 0})), QPN: 1, QKey: mad.GSIQKey, PKey: 0xffff}
	if err := m.HandleMAD(epoch, first, patch(caps[0], 1, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if len(n.sent) != 1 || mad.MAD(n.sent[0]).Header().AttrID() != mad.AttrMRA {
		t.Errorf("duplicate REQ answered with %d MADs", len(n.sent))
	}
}
