package qp

import (
	"testing"

	"github.com/uroce/uroce/bth"
)

// TestGhostACK: an ACK for a PSN this QP never sent answers nothing. A
// stale ACK of an earlier connection on the same QPs, or a forged one,
// carries a PSN unrelated to the new one; half such PSNs lie ahead of
// the request outstanding, and were taken as coalesced ACKs of it
// (IBA 9.7.5.1.2), completing a WRITE the responder had not yet
// executed. The requester now drops every response at or past the
// highest PSN it sent (rxe's check_psn has no such bound).
func TestGhostACK(t *testing.T) {
	for _, ahead := range []int{1, 2, 100, 1 << 22} {
		c := New(t)
		c.PostSend(&SendWR{ID: 1, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{{Addr: ctxMemBase, Length: 64, LKey: c.MR.LKey}},
			RemoteAddr: 0x1000, RKey: 0x1234})
		req := c.GetPacket()
		psn := req.BTH().PSN()
		dropped := c.QP.Counters().Dropped
		c.SendPacket(ackFields(psn.Add(ahead)), nil)
		if n := c.SCQ.Poll(make([]Completion, 2)); n != 0 {
			t.Fatalf("an ACK %d PSNs past the last sent completed %d WRs", ahead, n)
		}
		if c.QP.Counters().Dropped != dropped+1 {
			t.Errorf("ahead %d: dropped moved by %d, want 1", ahead, c.QP.Counters().Dropped-dropped)
		}
		// The real ACK completes it.
		c.SendPacket(ackFields(psn), nil)
		if wc := c.PollOne(c.SCQ); wc.WRID != 1 || wc.Status != WCSuccess {
			t.Fatalf("the real ACK: %+v", wc)
		}
		c.Cleanup()
	}
}

// ackFields is an ACK of psn with MSN 1.
func ackFields(psn bth.PSN) *bth.PacketFields {
	f := &bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCAcknowledge, PSN: psn}}
	f.AETH.Syndrome, f.AETH.MSN = ack, 1
	return f
}
