package mad_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// unhex reads hex with spaces and line breaks.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The rdma_cm header of a SIDR_REQ from 10.77.0.12, UDP source port
// 0xc33d, to 10.77.0.11 (cma_format_hdr, as in the REQs of the captures).
var sidrCMAHeader = mad.CMAHeaderFields{Version: 0, IPVersion: 4, SrcPort: 0xc33d, Src: g2, Dst: g1}

// TestSIDRGolden writes a SIDR_REQ and a SIDR_REP for udaddy's port 7174
// and compares them byte for byte with the layouts of IBA 12.11.1-2
// (Tables 119 and 120) written out by hand, then reads them back.
func TestSIDRGolden(t *testing.T) {
	pd := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(pd).Encode(&sidrCMAHeader)
	req := mad.SIDRREQFields{RequestID: 0x8f50d0ae, PKey: 0xffff, ServiceID: mad.IPServiceID(mad.PortSpaceUDP, 7174), PrivateData: pd}
	wantREQ := unhex(t, `
		01 07 02 03 0000 0000 00000002 8f50d0ae 0017 0000 00000000
		8f50d0ae ffff 0000 0000000001111c06
		00 40 c33d 000000000000000000000000 0a4d000c 000000000000000000000000 0a4d000b`)
	b := make([]byte, mad.Size)
	m := mad.NewCM(b, mad.AttrSIDRREQ, 0x28f50d0ae)
	m.SIDRREQ().Encode(&req)
	if !bytes.Equal(b[:len(wantREQ)], wantREQ) || !allZero(b[len(wantREQ):]) {
		t.Errorf("SIDR_REQ\n got %x\nwant %x", b, wantREQ)
	}
	d, err := mad.DecodeCM(b)
	if err != nil {
		t.Fatal(err)
	}
	got := d.SIDRREQ().Fields()
	if got.RequestID != req.RequestID || got.PKey != req.PKey || got.ServiceID != req.ServiceID || len(got.PrivateData) != mad.SIDRREQPrivateDataLen {
		t.Errorf("SIDR_REQ read back %+v", got)
	}
	if ps, port, ok := mad.ParseIPServiceID(got.ServiceID); !ok || ps != mad.PortSpaceUDP || port != 7174 {
		t.Errorf("service ID %#x: %v %d %v", got.ServiceID, ps, port, ok)
	}
	h := mad.CMAHeader(got.PrivateData)
	if err := h.Check(); err != nil || h.Fields() != sidrCMAHeader {
		t.Errorf("rdma_cm header %+v (%v)", h.Fields(), err)
	}

	rep := mad.SIDRREPFields{RequestID: 0x8f50d0ae, Status: mad.SIDRValid, QPN: 0x11, ServiceID: req.ServiceID, QKey: 0x01234567, PrivateData: []byte("hi")}
	wantREP := unhex(t, `
		01 07 02 03 0000 0000 00000002 8f50d0ae 0018 0000 00000000
		8f50d0ae 00 00 0000 00001100 0000000001111c06 01234567`)
	wantREP = append(wantREP, make([]byte, mad.SIDRREPInfoLen)...)
	wantREP = append(wantREP, "hi"...)
	m = mad.NewCM(b, mad.AttrSIDRREP, 0x28f50d0ae)
	m.SIDRREP().Encode(&rep)
	if !bytes.Equal(b[:len(wantREP)], wantREP) || !allZero(b[len(wantREP):]) {
		t.Errorf("SIDR_REP\n got %x\nwant %x", b, wantREP)
	}
	r := mad.MAD(b).SIDRREP()
	if r.RequestID() != rep.RequestID || r.Status() != mad.SIDRValid || r.QPN() != 0x11 || r.QKey() != 0x01234567 ||
		r.ServiceID() != rep.ServiceID || string(r.PrivateData()[:2]) != "hi" || len(r.PrivateData()) != mad.SIDRREPPrivateDataLen {
		t.Errorf("SIDR_REP read back %+v", r.Fields())
	}
}

// The kernel's SIDR_REQ and SIDR_REP as the lab's bridge recorded them
// (TestUdaddyRxe: udaddy from rdmacm-utils 44 on Debian 12's kernel 6.1
// with rxe at 10.77.0.11, uroce at 10.77.0.1): the MAD's bytes up to the
// last nonzero one; the rest of the 256 are zero.
const (
	// udaddy's client (rdma_connect on a UD ID): ib_cm's TID (hi_tid 2
	// and the Request ID as it lies in memory, as for REQs), P_Key
	// 0xffff, UDP port 7174, rdma_cm's header from port 0xa6f7.
	rxeSIDRREQ = `01070203 00000000 00000002 f3298da8 00170000 00000000
		a88d29f3 ffff0000 00000000 01111c06
		0040a6f7 00000000 00000000 00000000 0a4d000b 00000000 00000000 00000000 0a4d0001`
	// udaddy's server (rdma_accept on a UD ID) answering uroce's
	// request: the TID and Request ID echoed, status valid, QPN 0x11,
	// the service ID, librdmacm's Q_Key, no private data.
	rxeSIDRREP = `01070203 00000000 1a3ea851 effbd0e5 00180000 00000000
		effbd0e5 00000000 00001100 00000000 01111c06 01234567`
)

// TestSIDRKernelGolden decodes the kernel's SIDR_REQ and SIDR_REP, checks
// every field, and re-encodes each from its fields alone, byte for byte.
func TestSIDRKernelGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hex   string
		check func(t *testing.T, m mad.MAD)
	}{
		{"SIDR_REQ", rxeSIDRREQ, func(t *testing.T, m mad.MAD) {
			f := m.SIDRREQ().Fields()
			if f.RequestID != 0xa88d29f3 || f.PKey != 0xffff || f.ServiceID != mad.IPServiceID(mad.PortSpaceUDP, 7174) {
				t.Errorf("fields %+v", f)
			}
			h := mad.CMAHeader(f.PrivateData)
			want := mad.CMAHeaderFields{IPVersion: 4, SrcPort: 0xa6f7, Src: g1, Dst: netip.MustParseAddr("10.77.0.1")}
			if err := h.Check(); err != nil || h.Fields() != want {
				t.Errorf("rdma_cm header %+v (%v)", h.Fields(), err)
			}
			if !allZero(f.PrivateData[mad.CMAHeaderLen:]) {
				t.Errorf("user private data %x", f.PrivateData[mad.CMAHeaderLen:])
			}
		}},
		{"SIDR_REP", rxeSIDRREP, func(t *testing.T, m mad.MAD) {
			f := m.SIDRREP().Fields()
			if f.RequestID != 0xeffbd0e5 || f.Status != mad.SIDRValid || f.InfoLength != 0 || f.QPN != 0x11 ||
				f.ServiceID != mad.IPServiceID(mad.PortSpaceUDP, 7174) || f.QKey != 0x01234567 || !allZero(f.Info) || !allZero(f.PrivateData) {
				t.Errorf("fields %+v", f)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, mad.Size)
			copy(b, unhex(t, tc.hex))
			m, err := mad.DecodeCM(b)
			if err != nil {
				t.Fatal(err)
			}
			if h := m.Header(); h.Method() != mad.MethodSend || h.Class() != mad.ClassCM || h.ClassVersion() != mad.CMClassVersion {
				t.Errorf("header %+v", h.Fields())
			}
			tc.check(t, m)
			if got := reencode(m); !bytes.Equal(got, b) {
				t.Errorf("re-encoded\n got %x\nwant %x", got, b)
			}
		})
	}
}

// TestSIDRREPFields: every status, the additional information, a 24-bit
// QPN next to a reserved byte, and private data cut at the field's
// length.
func TestSIDRREPFields(t *testing.T) {
	info := bytes.Repeat([]byte{0xa5}, mad.SIDRREPInfoLen+8)
	long := bytes.Repeat([]byte{0x5a}, mad.SIDRREPPrivateDataLen+8)
	for _, tc := range []struct {
		f    mad.SIDRREPFields
		name string
	}{
		{mad.SIDRREPFields{Status: mad.SIDRValid, QPN: 0xffffff, QKey: 0xffffffff}, "valid"},
		{mad.SIDRREPFields{Status: mad.SIDRServiceNotSupported}, "service ID not supported"},
		{mad.SIDRREPFields{Status: mad.SIDRRejected, PrivateData: long}, "rejected"},
		{mad.SIDRREPFields{Status: mad.SIDRNoQP}, "no QP"},
		{mad.SIDRREPFields{Status: mad.SIDRRedirect, InfoLength: mad.SIDRREPInfoLen, Info: info}, "redirect"},
		{mad.SIDRREPFields{Status: mad.SIDRBadClassVersion}, "unsupported class version"},
		{mad.SIDRREPFields{Status: 9}, "SIDR status 9"},
	} {
		if s := tc.f.Status.String(); s != tc.name {
			t.Errorf("status %d: %q, want %q", tc.f.Status, s, tc.name)
		}
		b := make([]byte, mad.Size)
		m := mad.NewCM(b, mad.AttrSIDRREP, 1)
		m.SIDRREP().Encode(&tc.f)
		if b[mad.HeaderLen+11] != 0 {
			t.Errorf("%v: reserved byte after the QPN is %#x", tc.name, b[mad.HeaderLen+11])
		}
		got := m.SIDRREP().Fields()
		if got.Status != tc.f.Status || got.QPN != tc.f.QPN || got.QKey != tc.f.QKey || got.InfoLength != tc.f.InfoLength {
			t.Errorf("%v: read back %+v", tc.name, got)
		}
		wantInfo := make([]byte, mad.SIDRREPInfoLen)
		copy(wantInfo, tc.f.Info)
		wantPD := make([]byte, mad.SIDRREPPrivateDataLen)
		copy(wantPD, tc.f.PrivateData)
		if !bytes.Equal(got.Info, wantInfo) || !bytes.Equal(got.PrivateData, wantPD) {
			t.Errorf("%v: info %x, private data %x", tc.name, got.Info, got.PrivateData)
		}
	}
	// A QPN over 24 bits keeps its low 24 and leaves the reserved byte.
	b := make([]byte, mad.Size)
	mad.NewCM(b, mad.AttrSIDRREP, 1).SIDRREP().Encode(&mad.SIDRREPFields{QPN: 0x7f123456})
	if got := mad.MAD(b).SIDRREP().QPN(); got != 0x123456 || b[mad.HeaderLen+11] != 0 {
		t.Errorf("QPN %#x, reserved %#x", got, b[mad.HeaderLen+11])
	}
}

// TestSIDRREQPrivateData: the private data is cut at 216 bytes and
// zero-filled, and a request with no rdma_cm header fails Check.
func TestSIDRREQPrivateData(t *testing.T) {
	b := make([]byte, mad.Size)
	m := mad.NewCM(b, mad.AttrSIDRREQ, 1)
	m.SIDRREQ().Encode(&mad.SIDRREQFields{PrivateData: bytes.Repeat([]byte{1}, 300)})
	if pd := m.SIDRREQ().PrivateData(); len(pd) != mad.SIDRREQPrivateDataLen || bytes.Count(pd, []byte{1}) != mad.SIDRREQPrivateDataLen {
		t.Errorf("private data %x", pd)
	}
	m.SIDRREQ().Encode(&mad.SIDRREQFields{PrivateData: []byte{0, 0x40}})
	if err := mad.CMAHeader(m.SIDRREQ().PrivateData()).Check(); err != nil {
		t.Errorf("a zero header with IP version 4 is one rdma_cm may send: %v", err)
	}
	m.SIDRREQ().Encode(&mad.SIDRREQFields{})
	if err := mad.CMAHeader(m.SIDRREQ().PrivateData()).Check(); err == nil {
		t.Error("an all-zero private data passed as an rdma_cm header")
	}
}

// FuzzSIDR: any 232 data bytes read as a SIDR_REQ or a SIDR_REP (the
// first byte picks which) re-encode to themselves with only the reserved
// bits of Tables 119-120 cleared, and an rdma_cm header in a SIDR_REQ's
// private data reads without panicking.
func FuzzSIDR(f *testing.F) {
	pd := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(pd).Encode(&sidrCMAHeader)
	for _, attr := range []mad.AttrID{mad.AttrSIDRREQ, mad.AttrSIDRREP} {
		b := make([]byte, mad.Size)
		m := mad.NewCM(b, attr, 1)
		if attr == mad.AttrSIDRREQ {
			m.SIDRREQ().Encode(&mad.SIDRREQFields{RequestID: 7, PKey: 0xffff, ServiceID: mad.IPServiceID(mad.PortSpaceUDP, 7174), PrivateData: pd})
		} else {
			m.SIDRREP().Encode(&mad.SIDRREPFields{RequestID: 7, QPN: 0x11, QKey: 0x01234567, ServiceID: mad.IPServiceID(mad.PortSpaceUDP, 7174)})
		}
		f.Add(append([]byte{byte(attr)}, m.Data()...))
	}
	for _, k := range []struct {
		attr mad.AttrID
		hex  string
	}{{mad.AttrSIDRREQ, rxeSIDRREQ}, {mad.AttrSIDRREP, rxeSIDRREP}} {
		b := make([]byte, mad.Size)
		copy(b, unhex(f, k.hex))
		f.Add(append([]byte{byte(k.attr)}, b[mad.HeaderLen:]...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 1+mad.DataLen {
			return
		}
		attr := mad.AttrSIDRREQ + mad.AttrID(in[0]&1)
		b := make([]byte, mad.Size)
		m := mad.NewCM(b, attr, 1)
		copy(m.Data(), in[1:])
		m, err := mad.DecodeCM(b)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, mad.Size)
		copy(want, b)
		for off, mask := range reservedBits[attr] {
			want[mad.HeaderLen+off] &^= mask
		}
		if got := reencode(m); !bytes.Equal(got, want) {
			t.Fatalf("%v re-encoded\n got %x\nwant %x", attr, got, want)
		}
		if attr == mad.AttrSIDRREQ {
			h := mad.CMAHeader(m.SIDRREQ().PrivateData())
			if h.Check() == nil {
				fl := h.Fields()
				out := make([]byte, mad.CMAHeaderLen)
				mad.CMAHeader(out).Encode(&fl)
				if mad.CMAHeader(out).Fields() != fl {
					t.Fatalf("rdma_cm header %+v does not round-trip", fl)
				}
			}
		} else {
			_ = m.SIDRREP().Status().String()
		}
	})
}
