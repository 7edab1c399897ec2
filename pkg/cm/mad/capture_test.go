package mad_test

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// capturedMAD is one QP1 datagram from a reference capture.
type capturedMAD struct {
	file     string
	record   int
	src, dst netip.Addr
	payload  []byte
}

// captureMADs returns every UD SEND Only to QP1 in the captures that hold
// rdma_cm exchanges, in capture order.
func captureMADs(t testing.TB) []capturedMAD {
	t.Helper()
	var out []capturedMAD
	for _, name := range []string{"rping.pcap", "ib_write_lat_rdmacm.pcap"} {
		f, err := pcapfile.ReadFile(filepath.Join("../../../testdata/rxe-captures", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range f.Records {
			var fr bth.Frame
			err := fr.Decode(r.Data)
			if errors.Is(err, bth.ErrNotRoCE) {
				continue
			}
			if err != nil {
				t.Fatalf("%s #%d: %v", name, i, err)
			}
			if fr.Opcode() != bth.UDSendOnly || fr.BTH().DestQP() != mad.GSIQPN {
				continue
			}
			if q := fr.DETH().QKey(); q != mad.GSIQKey {
				t.Fatalf("%s #%d: QP1 datagram with Q_Key %#x", name, i, q)
			}
			ip := fr.IPv4()
			out = append(out, capturedMAD{name, i, ip.Src(), ip.Dst(), fr.Payload()})
		}
	}
	return out
}

// reencode builds a MAD from the decoded fields of m alone.
func reencode(m mad.MAD) []byte {
	b := make([]byte, mad.Size)
	out := mad.MAD(b)
	h := m.Header().Fields()
	out.EncodeHeader(&h)
	switch h.AttrID {
	case mad.AttrREQ:
		f := m.REQ().Fields()
		out.REQ().Encode(&f)
	case mad.AttrMRA:
		f := m.MRA().Fields()
		out.MRA().Encode(&f)
	case mad.AttrREJ:
		f := m.REJ().Fields()
		out.REJ().Encode(&f)
	case mad.AttrREP:
		f := m.REP().Fields()
		out.REP().Encode(&f)
	case mad.AttrRTU:
		f := m.RTU().Fields()
		out.RTU().Encode(&f)
	case mad.AttrDREQ:
		f := m.DREQ().Fields()
		out.DREQ().Encode(&f)
	case mad.AttrDREP:
		f := m.DREP().Fields()
		out.DREP().Encode(&f)
	case mad.AttrLAP:
		f := m.LAP().Fields()
		out.LAP().Encode(&f)
	case mad.AttrAPR:
		f := m.APR().Fields()
		out.APR().Encode(&f)
	case mad.AttrSIDRREQ:
		f := m.SIDRREQ().Fields()
		out.SIDRREQ().Encode(&f)
	case mad.AttrSIDRREP:
		f := m.SIDRREP().Fields()
		out.SIDRREP().Encode(&f)
	default:
		copy(out.Data(), m.Data())
	}
	return b
}
