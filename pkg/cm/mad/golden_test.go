package mad_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
)

var (
	g1 = netip.MustParseAddr("10.77.0.11") // server (passive)
	g2 = netip.MustParseAddr("10.77.0.12") // client (active)
)

// want describes one CM MAD of the captures by what the captures' README
// and the commands that made them say, plus what rxe and the kernel's
// ib_cm always send (CMA_CM_RESPONSE_TIMEOUT 20, CMA_MAX_CM_RETRIES 15,
// rxe's ack delay 15, permissive LIDs).
type want struct {
	attr  mad.AttrID
	tid   uint64
	src   netip.Addr
	check func(t *testing.T, m mad.MAD)
}

func reqCheck(commID uint32, port uint16, qpn, psn uint32, rr uint8, flow uint32, srcPort uint16) func(*testing.T, mad.MAD) {
	return func(t *testing.T, m mad.MAD) {
		t.Helper()
		r := m.REQ()
		got := r.Fields()
		exp := mad.REQFields{
			LocalCommID:             commID,
			ServiceID:               mad.IPServiceID(mad.PortSpaceTCP, port),
			LocalCAGUID:             0x505400fffe77000c, // EUI-64 of g2's MAC
			LocalQPN:                qpn,
			ResponderResources:      rr,
			InitiatorDepth:          rr,
			RemoteCMResponseTimeout: 20,
			TransportService:        mad.ServiceRC,
			StartingPSN:             psn,
			LocalCMResponseTimeout:  20,
			RetryCount:              7,
			PKey:                    0xffff,
			PathMTU:                 mad.MTU1024,
			RNRRetryCount:           7,
			MaxCMRetries:            15,
			Primary: mad.Path{
				LocalLID:        0xffff,
				RemoteLID:       0xffff,
				LocalGID:        mad.GIDFromAddr(g2),
				RemoteGID:       mad.GIDFromAddr(g1),
				FlowLabel:       flow,
				HopLimit:        64,
				LocalACKTimeout: 19,
			},
			PrivateData: got.PrivateData,
		}
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("REQ\n got %+v\nwant %+v", got, exp)
		}
		if ps, p, ok := mad.ParseIPServiceID(r.ServiceID()); !ok || ps != mad.PortSpaceTCP || p != port {
			t.Errorf("service ID %#x: %v %d %v", r.ServiceID(), ps, p, ok)
		}
		if r.Primary().LocalGID.String() != "::ffff:10.77.0.12" || r.Primary().RemoteGID.String() != "::ffff:10.77.0.11" {
			t.Errorf("GIDs %v %v", r.Primary().LocalGID, r.Primary().RemoteGID)
		}
		h := mad.CMAHeader(r.PrivateData())
		if err := h.Check(); err != nil {
			t.Fatal(err)
		}
		hf := h.Fields()
		if hf != (mad.CMAHeaderFields{Version: 0, IPVersion: 4, SrcPort: srcPort, Src: g2, Dst: g1}) {
			t.Errorf("rdma_cm header %+v", hf)
		}
		if !allZero(r.PrivateData()[mad.CMAHeaderLen:]) {
			t.Errorf("user private data %x", r.PrivateData()[mad.CMAHeaderLen:])
		}
	}
}

func repCheck(local, remote, qpn, psn uint32, rr uint8) func(*testing.T, mad.MAD) {
	return func(t *testing.T, m mad.MAD) {
		t.Helper()
		got := m.REP().Fields()
		exp := mad.REPFields{
			LocalCommID:        local,
			RemoteCommID:       remote,
			LocalQPN:           qpn,
			StartingPSN:        psn,
			ResponderResources: rr,
			InitiatorDepth:     rr,
			TargetACKDelay:     15,
			RNRRetryCount:      7,
			LocalCAGUID:        0x505400fffe77000b,
			PrivateData:        got.PrivateData,
		}
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("REP\n got %+v\nwant %+v", got, exp)
		}
		if !allZero(got.PrivateData) {
			t.Errorf("REP private data %x", got.PrivateData)
		}
	}
}

func idsCheck(local, remote uint32) func(*testing.T, mad.MAD) {
	return func(t *testing.T, m mad.MAD) {
		t.Helper()
		// RTU and DREP share the layout; read through the view the
		// attribute names.
		var f mad.CommIDsFields
		if m.Header().AttrID() == mad.AttrRTU {
			f = m.RTU().Fields()
		} else {
			f = m.DREP().Fields()
		}
		if f.LocalCommID != local || f.RemoteCommID != remote || !allZero(f.PrivateData) {
			t.Errorf("%v: %#x %#x %x", m.Header().AttrID(), f.LocalCommID, f.RemoteCommID, f.PrivateData)
		}
	}
}

func dreqCheck(local, remote, qpn uint32) func(*testing.T, mad.MAD) {
	return func(t *testing.T, m mad.MAD) {
		t.Helper()
		f := m.DREQ().Fields()
		if f.LocalCommID != local || f.RemoteCommID != remote || f.RemoteQPN != qpn || !allZero(f.PrivateData) {
			t.Errorf("DREQ %+v", f)
		}
	}
}

func allZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// The kernel makes a TID from its MAD agent's hi_tid (2 here) and the
// sender's local comm ID as it lies in memory (cm_form_tid), so the low
// word is the comm ID byte-swapped; responses reuse the request's TID.
var golden = []want{
	// rping: rping -c -a 10.77.0.11 -C 5 -S 64, server port 7174.
	{mad.AttrREQ, 0x28f50d0ae, g2, reqCheck(0xaed0508f, 7174, 0x1b, 0x1fe01b, 1, 0x7c069, 0xc33d)},
	{mad.AttrREP, 0x28f50d0ae, g1, repCheck(0x01bce9b5, 0xaed0508f, 0x1b, 0x5fc562, 1)},
	{mad.AttrRTU, 0x28f50d0ae, g2, idsCheck(0xaed0508f, 0x01bce9b5)},
	{mad.AttrDREQ, 0x28f50d0ae, g2, dreqCheck(0xaed0508f, 0x01bce9b5, 0x1b)},
	{mad.AttrDREP, 0x28f50d0ae, g1, idsCheck(0x01bce9b5, 0xaed0508f)},
	// ib_write_lat -R: the out-of-band connection (QP 0x1c, perftest's
	// port 18515), then the test's (QP 0x1d); the server disconnects both.
	{mad.AttrREQ, 0x28f50d0af, g2, reqCheck(0xafd0508f, 18515, 0x1c, 0x84453d, 0, 0x9cbe1, 0xd2b2)},
	{mad.AttrREP, 0x28f50d0af, g1, repCheck(0x03bce9b5, 0xafd0508f, 0x1c, 0x4de76d, 0)},
	{mad.AttrRTU, 0x28f50d0af, g2, idsCheck(0xafd0508f, 0x03bce9b5)},
	{mad.AttrREQ, 0x28f50d0ac, g2, reqCheck(0xacd0508f, 18515, 0x1d, 0x62bd97, 0, 0xb5c18, 0xdf9b)},
	{mad.AttrREP, 0x28f50d0ac, g1, repCheck(0x05bce9b5, 0xacd0508f, 0x1d, 0xb65b19, 0)},
	{mad.AttrRTU, 0x28f50d0ac, g2, idsCheck(0xacd0508f, 0x05bce9b5)},
	{mad.AttrDREQ, 0x2b5e9bc05, g1, dreqCheck(0x05bce9b5, 0xacd0508f, 0x1d)},
	{mad.AttrDREP, 0x2b5e9bc05, g2, idsCheck(0xacd0508f, 0x05bce9b5)},
	{mad.AttrDREQ, 0x2b5e9bc03, g1, dreqCheck(0x03bce9b5, 0xafd0508f, 0x1c)},
	{mad.AttrDREP, 0x2b5e9bc03, g2, idsCheck(0xafd0508f, 0x03bce9b5)},
}

// TestCaptureGolden decodes every CM MAD rxe and the kernel's ib_cm sent
// in the rdma_cm captures, checks each field against the README and the
// commands, and re-encodes each from its fields alone, byte for byte.
func TestCaptureGolden(t *testing.T) {
	mads := captureMADs(t)
	if len(mads) != len(golden) {
		t.Fatalf("%d QP1 datagrams in the captures, want %d", len(mads), len(golden))
	}
	for i, c := range mads {
		w := golden[i]
		t.Run(fmt.Sprintf("%s#%d", c.file, c.record), func(t *testing.T) {
			m, err := mad.DecodeCM(c.payload)
			if err != nil {
				t.Fatal(err)
			}
			h := m.Header().Fields()
			wantHdr := mad.HeaderFields{BaseVersion: 1, Class: mad.ClassCM, ClassVersion: 2, Method: mad.MethodSend, TID: w.tid, AttrID: w.attr}
			if h != wantHdr {
				t.Errorf("header %+v, want %+v", h, wantHdr)
			}
			if c.src != w.src {
				t.Errorf("sent by %v, want %v", c.src, w.src)
			}
			w.check(t, m)
			if got := reencode(m); !bytes.Equal(got, c.payload) {
				t.Errorf("re-encoded MAD differs\n got %x\nwant %x", got, c.payload)
			}
		})
	}
}
