package bth

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// naiveICRC is the ICRC as the annex words it: copy, mask, hash.
func naiveICRC(ip []byte) uint32 {
	b := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ip[:len(ip)-ICRCLen]...)
	h := b[8:]
	var ipLen int
	if h[0]>>4 == 6 {
		ipLen = IPv6Len
		h[0] |= 0x0f
		h[1], h[2], h[3], h[7] = 0xff, 0xff, 0xff, 0xff
	} else {
		ipLen = int(h[0]&0x0f) * 4
		h[1], h[8], h[10], h[11] = 0xff, 0xff, 0xff, 0xff
	}
	h[ipLen+6], h[ipLen+7] = 0xff, 0xff
	h[ipLen+UDPLen+4] = 0xff
	return crc32.ChecksumIEEE(b)
}

// TestICRCMatchesNaive compares the masked-word implementation with the
// annex's definition on random datagrams of every header layout: IPv6 and
// IPv4 with every header length, payloads of every length mod 8.
func TestICRCMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		ipLen := IPv6Len
		b := make([]byte, 0, 300)
		if i%2 == 0 {
			ipLen = 4 * (5 + r.IntN(11))
			b = append(b, byte(0x40|ipLen/4))
		} else {
			b = append(b, byte(0x60|r.IntN(16)))
		}
		n := ipLen + UDPLen + BTHLen + r.IntN(200) + ICRCLen
		for len(b) < n {
			b = append(b, byte(r.Uint32()))
		}
		orig := bytes.Clone(b)
		got, err := ICRC(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveICRC(b); got != want {
			t.Fatalf("layout %d, %d bytes: ICRC %08x, annex says %08x", ipLen, n, got, want)
		}
		if !bytes.Equal(b, orig) {
			t.Fatal("ICRC wrote to its input")
		}
	}
}

// FuzzICRCNaive holds ICRC to the annex's definition on every datagram it
// accepts: every header layout and every length after the BTH, the part
// ICRC hashes in pieces of 8, 4 and 1 bytes around hash/crc32's.
func FuzzICRCNaive(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, rest := range []int{0, 4, 16, 20, 60, 64, 68, 80, 84, 132} {
		for _, ipLen := range []int{IPv4MinLen, 24, IPv6Len} {
			b := []byte{byte(0x40 | ipLen/4)}
			if ipLen == IPv6Len {
				b[0] = 0x60
			}
			for len(b) < ipLen+UDPLen+BTHLen+rest+ICRCLen {
				b = append(b, byte(r.Uint32()))
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ICRC(b)
		if err != nil {
			return
		}
		if want := naiveICRC(b); got != want {
			t.Fatalf("%d bytes: ICRC %08x, annex says %08x", len(b), got, want)
		}
	})
}
