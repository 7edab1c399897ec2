package rdmacm

import (
	"fmt"
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// TestSelectiveRepeat: two uroce ends turn selective repeat on for both
// QPs by default; GoBackN on either side sends that side's REQ or REP
// as ib_cm does (no Caps) and leaves it off on both, as a kernel peer
// would. Params.Retrans reach the QPs either way, and traffic flows.
func TestSelectiveRepeat(t *testing.T) {
	for i, tc := range []struct {
		dialGBN, acceptGBN bool
		retrans            verbs.RetransFlags
	}{
		{false, false, 0},
		{false, false, verbs.RetransFixed},
		{true, false, 0},
		{false, true, verbs.RetransRetry7Forever},
		{true, true, 0},
	} {
		t.Run(fmt.Sprintf("dial_gbn=%v,accept_gbn=%v,retrans=%d", tc.dialGBN, tc.acceptGBN, tc.retrans), func(t *testing.T) {
			a, b, h := pipePair(t, fastCM)
			ca, cb := connectWith(t, a, b, uint16(7300+i),
				&Params{GoBackN: tc.dialGBN, Retrans: tc.retrans | verbs.RetransSelective},
				&Params{GoBackN: tc.acceptGBN, Retrans: tc.retrans})
			on := !tc.dialGBN && !tc.acceptGBN
			want := tc.retrans
			if on {
				want |= verbs.RetransSelective
			}
			for _, c := range []*Conn{ca, cb} {
				if got := c.QP().Attr().Retrans; got != want {
					t.Errorf("QP %#x (active %v): retrans %#x, want %#x", c.QP().QPN(), c.active, got, want)
				}
				if c.Attr().SelectiveRepeat != on {
					t.Errorf("active %v: Attr().SelectiveRepeat %v, want %v", c.active, c.Attr().SelectiveRepeat, on)
				}
			}
			req, rep := h.sentOf(mad.AttrREQ)[0].REQ(), h.sentOf(mad.AttrREP)[0].REP()
			if offered := req.UroceCaps() != 0; offered == tc.dialGBN {
				t.Errorf("REQ offers %#x", req.UroceCaps())
			}
			if took := rep.UroceCaps() != 0; took != on {
				t.Errorf("REP takes %#x", rep.UroceCaps())
			}
			exchange(t, a, b, ca, cb)
			exchange(t, b, a, cb, ca)
		})
	}
}
