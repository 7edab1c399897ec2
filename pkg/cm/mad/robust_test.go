package mad_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// TestTruncatedPrefixes feeds every proper prefix of every captured MAD,
// and of its rdma_cm header, to the decoders: each must fail with
// ErrTruncated, never panic and never succeed.
func TestTruncatedPrefixes(t *testing.T) {
	for _, c := range captureMADs(t) {
		for n := range len(c.payload) {
			if _, err := mad.DecodeCM(c.payload[:n]); !errors.Is(err, mad.ErrTruncated) {
				t.Fatalf("%s #%d: prefix of %d bytes: %v", c.file, c.record, n, err)
			}
			if _, err := mad.Decode(c.payload[:n]); !errors.Is(err, mad.ErrTruncated) {
				t.Fatalf("%s #%d: prefix of %d bytes: %v", c.file, c.record, n, err)
			}
		}
		long := append(bytes.Clone(c.payload), 0)
		if _, err := mad.DecodeCM(long); !errors.Is(err, mad.ErrBadLength) {
			t.Fatalf("%s #%d: 257 bytes: %v", c.file, c.record, err)
		}
		m, _ := mad.DecodeCM(c.payload)
		if m.Header().AttrID() != mad.AttrREQ {
			continue
		}
		pd := m.REQ().PrivateData()
		for n := range mad.CMAHeaderLen {
			if err := mad.CMAHeader(pd[:n]).Check(); !errors.Is(err, mad.ErrTruncated) {
				t.Fatalf("rdma_cm header prefix of %d bytes: %v", n, err)
			}
		}
	}
}

// TestDecodeErrors checks each header check names its sentinel.
func TestDecodeErrors(t *testing.T) {
	base := captureMADs(t)[0].payload
	for _, tc := range []struct {
		name string
		off  int
		val  byte
		want error
	}{
		{"base version", 0, 2, mad.ErrBadBaseVersion},
		{"class", 1, byte(mad.ClassSubnAdm), mad.ErrNotCM},
		{"class version", 2, 1, mad.ErrBadClassVersion},
		{"method", 3, byte(mad.MethodGetResp), mad.ErrBadMethod},
		{"attribute ClassPortInfo", 17, 0x01, mad.ErrUnknownAttr},
		{"attribute past APR", 17, 0x1b, mad.ErrUnknownAttr},
	} {
		b := bytes.Clone(base)
		b[tc.off] = tc.val
		if _, err := mad.DecodeCM(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Decode alone does not look past the base version.
	b := bytes.Clone(base)
	b[1] = byte(mad.ClassPerf)
	if _, err := mad.Decode(b); err != nil {
		t.Errorf("Decode of a PerfMgt MAD: %v", err)
	}
	h := bytes.Clone(base[24+140 : 24+140+36])
	h[0] = 1
	if err := mad.CMAHeader(h).Check(); !errors.Is(err, mad.ErrBadCMAHeader) {
		t.Errorf("rdma_cm header version 1: %v", err)
	}
	h[0], h[1] = 0, 0x50
	if err := mad.CMAHeader(h).Check(); !errors.Is(err, mad.ErrBadCMAHeader) {
		t.Errorf("rdma_cm header IP version 5: %v", err)
	}
}

// reservedBits is, per attribute, the data bytes and bits that are
// reserved: a random MAD re-encodes to itself with them cleared. This is
// the whole layout of IBA Tables 106-120 restated as masks, so a field
// at a wrong offset or width fails here.
var reservedBits = map[mad.AttrID]map[int]byte{
	mad.AttrREQ: {
		4: 0xff, 24: 0xff, 25: 0xff, 26: 0xff, 27: 0xff,
		// primary and alternate paths: flow label word's 6 reserved
		// bits, SL byte's low 3, ACK timeout byte's low 3 (the
		// alternate's has SAP Supported at bit 2).
		52 + 38: 0x0f, 52 + 39: 0xc0, 52 + 42: 0x07, 52 + 43: 0x07,
		96 + 38: 0x0f, 96 + 39: 0xc0, 96 + 42: 0x07, 96 + 43: 0x03,
	},
	mad.AttrMRA:  {8: 0x3f, 9: 0x07},
	mad.AttrREJ:  {8: 0x3f, 9: 0x01},
	mad.AttrREP:  {26: 0x00, 27: 0x00}, // byte 27's low 4 bits, reserved in IBA: uroce's Caps
	mad.AttrRTU:  {},
	mad.AttrDREQ: {11: 0xff},
	mad.AttrDREP: {},
	mad.AttrLAP: {8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 15: 0x07, 16: 0xff, 17: 0xff, 18: 0xff, 19: 0xff,
		58: 0x0f, 61: 0xc0, 62: 0x07, 63: 0x07},
	mad.AttrAPR:     {10: 0xff, 11: 0xff},
	mad.AttrSIDRREQ: {6: 0xff, 7: 0xff},
	mad.AttrSIDRREP: {6: 0xff, 7: 0xff, 11: 0xff},
}

// TestLayout encodes the fields of random messages and checks that only
// the reserved bits were lost, and that the fields survive the trip.
func TestLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for attr, res := range reservedBits {
		for range 200 {
			b := make([]byte, mad.Size)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			h := mad.HeaderFields{BaseVersion: 1, Class: mad.ClassCM, ClassVersion: 2, Method: mad.MethodSend, TID: rng.Uint64(), AttrID: attr, AttrMod: rng.Uint32()}
			mad.MAD(b).EncodeHeader(&h)
			m, err := mad.DecodeCM(b)
			if err != nil {
				t.Fatal(err)
			}
			got := reencode(m)
			want := bytes.Clone(b)
			want[18], want[19] = 0, 0 // header reserved
			for off, mask := range res {
				want[mad.HeaderLen+off] &^= mask
			}
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%v: data byte %d: got %#02x want %#02x", attr, i-mad.HeaderLen, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestMTU(t *testing.T) {
	for m, n := range map[mad.MTU]int{0: 0, mad.MTU256: 256, mad.MTU1024: 1024, mad.MTU4096: 4096, 6: 0} {
		if m.Bytes() != n {
			t.Errorf("%d.Bytes() = %d, want %d", m, m.Bytes(), n)
		}
	}
	for n, m := range map[int]mad.MTU{100: 0, 256: mad.MTU256, 1500: mad.MTU1024, 4096: mad.MTU4096, 9000: mad.MTU4096} {
		if got := mad.MTUFromBytes(n); got != m {
			t.Errorf("MTUFromBytes(%d) = %v, want %v", n, got, m)
		}
	}
}

func TestTimeout(t *testing.T) {
	if got := mad.Timeout(20); got != 4294967296*time.Nanosecond {
		t.Errorf("Timeout(20) = %v", got)
	}
	if mad.Timeout(0) != 4096*time.Nanosecond || mad.Timeout(40) != mad.Timeout(31) {
		t.Error("Timeout ends")
	}
}

func TestServiceID(t *testing.T) {
	if id := mad.IPServiceID(mad.PortSpaceTCP, 7174); id != 0x0000000001061c06 {
		t.Errorf("TCP 7174: %#x", id)
	}
	if id := mad.IPServiceID(mad.PortSpaceUDP, 1); id != 0x0000000001110001 {
		t.Errorf("UDP 1: %#x", id)
	}
	for _, id := range []uint64{0x1_0000_0106_0001, 0x013f0001, 0x02220001} {
		if _, _, ok := mad.ParseIPServiceID(id); ok {
			t.Errorf("%#x parsed as an IP service ID", id)
		}
	}
}

func TestCMAHeaderRoundTrip(t *testing.T) {
	for _, f := range []mad.CMAHeaderFields{
		{IPVersion: 4, SrcPort: 1, Src: netip.MustParseAddr("1.2.3.4"), Dst: netip.MustParseAddr("5.6.7.8")},
		{IPVersion: 6, SrcPort: 65535, Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2")},
	} {
		b := make([]byte, mad.CMAHeaderLen)
		mad.CMAHeader(b).Encode(&f)
		if err := mad.CMAHeader(b).Check(); err != nil {
			t.Fatal(err)
		}
		if got := mad.CMAHeader(b).Fields(); got != f {
			t.Errorf("got %+v want %+v", got, f)
		}
	}
	// A mapped IPv4 address is written unmapped; one that is not IPv4 as
	// zeros (and no panic).
	b := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(b).Encode(&mad.CMAHeaderFields{IPVersion: 4, Src: netip.MustParseAddr("::ffff:10.0.0.1"), Dst: netip.MustParseAddr("fd00::1")})
	if got := mad.CMAHeader(b).Src(); got != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("mapped source: %v", got)
	}
	if !allZero(b[20:36]) {
		t.Errorf("IPv6 destination in an IPv4 header: %x", b[20:36])
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []struct{ got, want string }{
		{mad.AttrREQ.String(), "REQ"},
		{mad.AttrSIDRREP.String(), "SIDR_REP"},
		{mad.AttrID(0x99).String(), "Attr(0x0099)"},
		{mad.MethodSend.String(), "Send"},
		{mad.RejConsumerDefined.String(), "consumer defined"},
		{mad.RejectReason(34).String(), "reject reason 34"},
		{mad.MTU1024.String(), "1024"},
		{mad.ServiceRC.String(), "RC"},
		{mad.PortSpaceTCP.String(), "TCP"},
		{mad.MsgREP.String(), "REP"},
		{mad.GIDFromAddr(netip.MustParseAddr("10.77.0.11")).String(), "::ffff:10.77.0.11"},
	} {
		if s.got != s.want {
			t.Errorf("got %q want %q", s.got, s.want)
		}
	}
}
