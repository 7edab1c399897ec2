package verbs_test

import (
	"testing"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// TestAttrRetrans: Attr reads back the state and the retransmission
// flags Connect set, selective repeat included, and selective repeat
// cannot be turned off once the QP is in RTS.
func TestAttrRetrans(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	a, b := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer a.Close()
	defer b.Close()
	mk := func(d *verbs.Device) *verbs.QueuePair {
		cq := d.CreateCQ(4)
		q, err := d.AllocPD().CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	qa, qb := mk(a), mk(b)
	if got := qa.Attr(); got.State != verbs.StateReset || got.Retrans != 0 {
		t.Fatalf("new QP: %+v", got)
	}
	f := verbs.RetransSelective | verbs.RetransFixed
	if err := qa.Connect(qb.Endpoint(2), verbs.ConnectOptions{PSN: 1, Retrans: f}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.Endpoint(1), verbs.ConnectOptions{PSN: 2}); err != nil {
		t.Fatal(err)
	}
	if got := qa.Attr(); got.State != verbs.StateRTS || got.Retrans != f || got.SQPSN != 1 {
		t.Errorf("connected with %v: %+v", f, got)
	}
	if got := qb.Attr(); got.Retrans != 0 {
		t.Errorf("connected without flags: retrans %v", got.Retrans)
	}
	if err := qa.Modify(&verbs.QPAttr{Retrans: verbs.RetransFixed}, verbs.AttrRetrans); err == nil {
		t.Error("selective repeat turned off in RTS")
	}
}
