package bth_test

import (
	"fmt"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
)

// frame builds an Ethernet/IPv4/UDP RoCE frame carrying an RDMA WRITE
// with n bytes of payload.
func frame(tb testing.TB, n int) []byte {
	tb.Helper()
	op := bth.RCWriteOnly
	roce := bth.PacketLen(op, n)
	b := make([]byte, bth.EthernetLen+bth.IPv4MinLen+bth.UDPLen+roce)
	bth.Ethernet(b).Encode(&bth.EthernetFields{EtherType: bth.EtherTypeIPv4})
	ip := b[bth.EthernetLen:]
	bth.IPv4(ip).Encode(&bth.IPv4Fields{
		TotalLength: uint16(len(ip)), Flags: bth.IPv4DontFragment, TTL: 64, Protocol: bth.ProtocolUDP,
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
	})
	bth.UDP(ip[bth.IPv4MinLen:]).Encode(&bth.UDPFields{SrcPort: 0xc121, DstPort: bth.RoCEPort, Length: uint16(bth.UDPLen + roce)})
	pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: op, PKey: 0xffff, DestQP: 0x11, AckReq: true}}
	pf.RETH.DMALen = uint32(n)
	if _, err := pf.Encode(ip[bth.IPv4MinLen+bth.UDPLen:], make([]byte, n)); err != nil {
		tb.Fatal(err)
	}
	if err := bth.PutICRC(ip); err != nil {
		tb.Fatal(err)
	}
	return b
}

var sizes = []int{64, 256, 1024, 4096}

// BenchmarkICRC measures the ICRC beside plain hash/crc32 over the same
// bytes, in alternating chunks of the same loop so that load on the
// machine hits both alike, and reports speed-vs-crc32: crc32's time over
// the ICRC's (1 would be free masking; the target is at least 0.8).
func BenchmarkICRC(b *testing.B) {
	for _, n := range sizes {
		d := frame(b, n)[bth.EthernetLen:]
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			const chunk = 256
			var icrc, plain time.Duration
			var sink uint32
			for b.Loop() {
				t0 := time.Now()
				for range chunk {
					c, err := bth.ICRC(d)
					if err != nil {
						b.Fatal(err)
					}
					sink ^= c
				}
				t1 := time.Now()
				for range chunk {
					sink ^= crc32.ChecksumIEEE(d[:len(d)-bth.ICRCLen])
				}
				icrc += t1.Sub(t0)
				plain += time.Since(t1)
			}
			_ = sink
			b.ReportMetric(float64(plain)/float64(icrc), "speed-vs-crc32")
			b.ReportMetric(float64(icrc.Nanoseconds())/float64(b.N*chunk), "icrc-ns/pkt")
			b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N*chunk), "crc32-ns/pkt")
		})
	}
}

// BenchmarkParseVerify decodes a whole frame and verifies its ICRC: the
// receive path's per-packet cost. It must not allocate.
func BenchmarkParseVerify(b *testing.B) {
	for _, n := range []int{64, 4096} {
		d := frame(b, n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d)))
			var f bth.Frame
			for b.Loop() {
				if err := f.Decode(d); err != nil {
					b.Fatal(err)
				}
				if err := f.VerifyICRC(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode builds the headers of a WRITE and its ICRC in place.
func BenchmarkEncode(b *testing.B) {
	d := frame(b, 1024)
	ip := d[bth.EthernetLen:]
	roce := ip[bth.IPv4MinLen+bth.UDPLen:]
	pay := make([]byte, 1024)
	pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCWriteOnly, PKey: 0xffff, DestQP: 0x11}}
	b.ReportAllocs()
	for b.Loop() {
		pf.BTH.PSN = pf.BTH.PSN.Next()
		if _, err := pf.Encode(roce, pay); err != nil {
			b.Fatal(err)
		}
		if err := bth.PutICRC(ip); err != nil {
			b.Fatal(err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	d := frame(t, 64)
	var f bth.Frame
	if n := testing.AllocsPerRun(100, func() {
		if f.Decode(d) != nil || f.VerifyICRC() != nil {
			t.Fatal("bad frame")
		}
	}); n != 0 {
		t.Errorf("Decode+VerifyICRC: %v allocs per packet", n)
	}
}

// BenchmarkUDPChecksum measures the UDP checksum over a whole datagram,
// which the IPv6 senders compute for every packet (RFC 8200 section 8.1).
func BenchmarkUDPChecksum(b *testing.B) {
	for _, n := range sizes {
		d := frame(b, n)[bth.EthernetLen:]
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d)))
			for b.Loop() {
				bth.PutUDPChecksum(d)
			}
		})
	}
}

// BenchmarkDatagram measures what a link does for each packet around
// the ICRC: write the IP and UDP headers in front of the RoCE packet, and
// parse them back on receive.
func BenchmarkDatagram(b *testing.B) {
	for _, dst := range []string{"10.0.0.2", "fd00::2"} {
		src := "10.0.0.1"
		if dst == "fd00::2" {
			src = "fd00::1"
		}
		h := bth.DatagramFields{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
			SrcPort: 0xc000, DstPort: bth.RoCEPort, TTL: 64, DF: true}
		buf := make([]byte, 128+1024)
		var g bth.Datagram
		b.Run(dst, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ip := bth.PutDatagramHeaders(buf, 128, 1024, &h)
				if err := bth.ParseDatagram(buf[ip:], &g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
