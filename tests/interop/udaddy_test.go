package interop_test

import (
	"testing"

	"github.com/uroce/uroce/bth"
)

// udaddyPort is udaddy's rdma_cm port (fixed; it has no flag for it).
const udaddyPort = 7174

// TestUdaddyRxe runs uroce's examples/udaddy against udaddy from
// rdmacm-utils on an rxe guest, each side as client and as server: two UD
// services of rdma_cm's UDP port space resolved with SIDR_REQ and
// SIDR_REP over QP1, then 10 datagrams of 100 bytes from the client on
// each and 10 replies from the server, sent to the address and QPN the
// first completion gave it. Both exit statuses, both reports and a
// capture of the bridge are checked.
func TestUdaddyRxe(t *testing.T) {
	const conns, count, size = 2, 10, 100
	runCMTest(t, "udaddy", udaddyPort, conns, count, size, func(t *testing.T, res facingResult) {
		// Each service: a SIDR_REQ and a SIDR_REP (more only if a slow
		// guest made the client retry), then count datagrams each way,
		// all SENDs with immediate data (the sender's QPN) and
		// librdmacm's Q_Key. UD never retransmits.
		if n := res.stats.Opcodes[bth.UDSendOnly]; n < 2*conns {
			t.Errorf("%d CM MADs in the capture, want at least %d", n, 2*conns)
		}
		if n := res.stats.Opcodes[bth.UDSendOnlyImm]; n != 2*conns*count {
			t.Errorf("%d UD SENDs with immediate in the capture, want %d", n, 2*conns*count)
		}
		n, bad := 0, 0
		for _, rec := range res.frames {
			var fr bth.Frame
			if fr.Decode(rec.Data) != nil || fr.Opcode() != bth.UDSendOnlyImm {
				continue
			}
			n++
			if fr.DETH().QKey() != 0x01234567 || len(fr.Payload()) != size || fr.ImmDt().Imm() != fr.DETH().SrcQP() {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d datagrams lack Q_Key 0x01234567, size %d, or their source QPN as immediate data", bad, n, size)
		}
	})
}
