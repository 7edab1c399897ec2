package qp

import "testing"

// TestQPNQuarantine: a destroyed QP's number is not given out again until
// qpnQuarantine others have been freed after it; the table grows by at
// most that many.
func TestQPNQuarantine(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	cfg := QPConfig{PD: 1, SendCQ: c.SCQ, RecvCQ: c.RCQ, MaxSendWR: 4, MaxRecvWR: 4}
	seen := map[uint32]int{}
	var live []*QP
	for i := range 1000 {
		q, err := c.E.CreateQP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if last, ok := seen[q.QPN()]; ok && i-last <= qpnQuarantine {
			t.Fatalf("QPN %#x given out again %d creations after", q.QPN(), i-last)
		}
		seen[q.QPN()] = i
		live = append(live, q)
		if len(live) > 3 { // keep a few alive, destroy the oldest
			if err := c.E.DestroyQP(live[0]); err != nil {
				t.Fatal(err)
			}
			live = live[1:]
		}
	}
	if n := len(c.E.qps); n > 3+qpnQuarantine+2 {
		t.Errorf("QP table of %d slots for at most 4 live QPs", n)
	}
}
