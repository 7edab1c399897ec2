package cnp_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc/cnp"
)

func TestEncode(t *testing.T) {
	b := bytes.Repeat([]byte{0xaa}, 64)
	n, err := cnp.Encode(b, 0x123456)
	if err != nil || n != 32 {
		t.Fatalf("Encode = %d, %v; want %d", n, err, cnp.Len)
	}
	want := []byte{
		0x81, 0x00, 0xff, 0xff, // opcode, SE/M/pad/TVer, P_Key
		0x40, 0x12, 0x34, 0x56, // BECN, dest QP
		0x00, 0x00, 0x00, 0x00, // AckReq, PSN 0
	}
	want = append(want, make([]byte, 16+4)...)
	if !bytes.Equal(b[:n], want) {
		t.Fatalf("CNP bytes\n got %x\nwant %x", b[:n], want)
	}
	var p bth.Packet
	if err := p.Decode(b[:n]); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if qp, ok := cnp.Is(&p); !ok || qp != 0x123456 {
		t.Fatalf("Is = %#x, %v", qp, ok)
	}
	if !p.BTH().BECN() || p.BTH().PKey() != 0xffff {
		t.Fatalf("BECN %v, P_Key %#x", p.BTH().BECN(), p.BTH().PKey())
	}
}

func TestEncodeShort(t *testing.T) {
	if _, err := cnp.Encode(make([]byte, cnp.Len-1), 1); !errors.Is(err, bth.ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
}
