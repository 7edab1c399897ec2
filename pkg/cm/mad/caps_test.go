package mad_test

import (
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// TestCaps: a REQ's Caps take its reserved word only when there are any
// (a REQ without them is ib_cm's, byte for byte), read back only behind
// the magic, and a REP's take the four reserved bits of byte 27 alone.
func TestCaps(t *testing.T) {
	b := make([]byte, mad.Size)
	m := mad.NewCM(b, mad.AttrREQ, 1)
	f := mad.REQFields{LocalQPN: 0x11, PathMTU: mad.MTU1024, RetryCount: 7, MaxCMRetries: 15, SRQ: true, ExtendedTransport: 7}
	m.REQ().Encode(&f)
	data := m.Data()
	if w := data[24:28]; w[0]|w[1]|w[2]|w[3] != 0 {
		t.Fatalf("REQ without Caps: reserved word %x", w)
	}
	f.UroceCaps = mad.CapSelectiveRepeat
	m.REQ().Encode(&f)
	if w := data[24:28]; w[0] != 'u' || w[1] != 'R' || w[2] != 0 || w[3] != 1 {
		t.Fatalf("REQ with Caps: reserved word %x", w)
	}
	if got := m.REQ().Fields(); got.UroceCaps != mad.CapSelectiveRepeat || got.LocalQPN != 0x11 || !got.SRQ || got.ExtendedTransport != 7 {
		t.Fatalf("REQ fields %+v", got)
	}
	// Reserved bits without the magic are not an offer.
	data[24] = 0
	if c := m.REQ().UroceCaps(); c != 0 {
		t.Fatalf("REQ without the magic offers %#x", c)
	}

	m = mad.NewCM(b, mad.AttrREP, 1)
	r := mad.REPFields{RNRRetryCount: 7, SRQ: true}
	m.REP().Encode(&r)
	if got := m.Data()[27]; got != 0xf0 {
		t.Fatalf("REP without Caps: byte 27 %#02x", got)
	}
	r.UroceCaps = mad.CapSelectiveRepeat | 0xf0 // the high bits have no room
	m.REP().Encode(&r)
	if got := m.Data()[27]; got != 0xf1 {
		t.Fatalf("REP with Caps: byte 27 %#02x", got)
	}
	if got := m.REP().Fields(); got.UroceCaps != mad.CapSelectiveRepeat || got.RNRRetryCount != 7 || !got.SRQ {
		t.Fatalf("REP fields %+v", got)
	}
}
