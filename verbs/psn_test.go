package verbs

import (
	"testing"

	"github.com/uroce/uroce/pkg/link/pipe"
)

// TestDefaultPSN: a QP given no first PSN takes a random one of its own,
// the same in Endpoint(0) and Connect, different between QPs; an explicit
// PSN is kept.
func TestDefaultPSN(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	a, b := Open(la, Inline()), Open(lb, Inline())
	defer a.Close()
	defer b.Close()
	mk := func(d *Device) *QueuePair {
		cq := d.CreateCQ(16)
		q, err := d.AllocPD().CreateQP(&QPInit{SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	qa, qb, qc := mk(a), mk(b), mk(b)
	ea, eb := qa.Endpoint(0), qb.Endpoint(0)
	for _, e := range []Endpoint{ea, eb, qc.Endpoint(0)} {
		if e.PSN == 0 || e.PSN > 0xffffff {
			t.Fatalf("default PSN %#x", e.PSN)
		}
	}
	if ea.PSN == eb.PSN && eb.PSN == qc.Endpoint(0).PSN {
		t.Fatalf("three QPs share the default PSN %#x", ea.PSN)
	}
	if err := qa.Connect(eb, ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(ea, ConnectOptions{PSN: 77}); err != nil {
		t.Fatal(err)
	}
	if got := qa.q.Attr(); got.SQPSN != ea.PSN || got.RQPSN != eb.PSN {
		t.Errorf("qa sq_psn %#x rq_psn %#x, want %#x and %#x", got.SQPSN, got.RQPSN, ea.PSN, eb.PSN)
	}
	if got := qb.q.Attr().SQPSN; got != 77 {
		t.Errorf("explicit PSN 77 became %#x", got)
	}
	if e := qb.Endpoint(77); e.PSN != 77 {
		t.Errorf("Endpoint(77) = %#x", e.PSN)
	}
}
