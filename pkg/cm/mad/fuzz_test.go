package mad_test

import (
	"bytes"
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
)

func seedMADs(f *testing.F) {
	for _, c := range captureMADs(f) {
		f.Add(c.payload)
	}
	for attr := range reservedBits {
		b := make([]byte, mad.Size)
		mad.NewCM(b, attr, 1)
		f.Add(b)
	}
}

// FuzzDecodeCM: any bytes either fail to decode or decode to a message
// whose fields re-encode to a MAD that decodes to the same fields (the
// re-encoding is a fixed point), without panics.
func FuzzDecodeCM(f *testing.F) {
	seedMADs(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := mad.DecodeCM(b)
		if err != nil {
			if len(b) == mad.Size && b[0] == mad.BaseVersion {
				// Decode alone must still accept it.
				if _, err := mad.Decode(b); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		once := reencode(m)
		m2, err := mad.DecodeCM(once)
		if err != nil {
			t.Fatalf("re-encoded MAD does not decode: %v", err)
		}
		if twice := reencode(m2); !bytes.Equal(once, twice) {
			t.Fatalf("re-encoding is not stable\n once %x\ntwice %x", once, twice)
		}
		if m.Header().AttrID() == mad.AttrREQ {
			h := mad.CMAHeader(m.REQ().PrivateData())
			if h.Check() == nil {
				_ = h.Fields()
			}
		}
	})
}

// FuzzCMAHeader: Check never panics, and a header that passes reads and
// re-encodes to the same fields.
func FuzzCMAHeader(f *testing.F) {
	for _, c := range captureMADs(f) {
		if m, err := mad.DecodeCM(c.payload); err == nil && m.Header().AttrID() == mad.AttrREQ {
			f.Add(bytes.Clone(m.REQ().PrivateData()))
		}
	}
	f.Add([]byte{0, 0x60, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := mad.CMAHeader(b)
		if h.Check() != nil {
			return
		}
		fl := h.Fields()
		out := make([]byte, mad.CMAHeaderLen)
		mad.CMAHeader(out).Encode(&fl)
		if got := mad.CMAHeader(out).Fields(); got != fl {
			t.Fatalf("got %+v want %+v", got, fl)
		}
	})
}
