package afpacket

import (
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
	"golang.org/x/net/bpf"
)

func TestFilter(t *testing.T) {
	prog, err := ipFilter()
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]bpf.Instruction, len(prog))
	for i, r := range prog {
		ins[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(src, dst string, port uint16, mod func([]byte)) []byte {
		b := make([]byte, 200)
		h := bth.DatagramFields{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: 1, DstPort: port, DF: true, TTL: 64}
		off := bth.EthernetLen + h.HeaderLen()
		bth.PutDatagramHeaders(b, off, 100, &h)
		et := uint16(bth.EtherTypeIPv4)
		if h.Dst.Is6() {
			et = bth.EtherTypeIPv6
		}
		bth.Ethernet(b).Encode(&bth.EthernetFields{EtherType: et})
		if mod != nil {
			mod(b)
		}
		return b[:off+100]
	}
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"v4", frame("10.0.0.1", "10.0.0.2", 4791, nil), true},
		{"v4 other port", frame("10.0.0.1", "10.0.0.2", 4792, nil), false},
		{"v4 fragment", frame("10.0.0.1", "10.0.0.2", 4791, func(b []byte) { b[14+7] = 1 }), false},
		{"v4 more fragments", frame("10.0.0.1", "10.0.0.2", 4791, func(b []byte) { b[14+6] |= 0x20 }), false},
		{"v4 tcp", frame("10.0.0.1", "10.0.0.2", 4791, func(b []byte) { b[14+9] = 6 }), false},
		{"v4 options", frame("10.0.0.1", "10.0.0.2", 4791, func(b []byte) {
			b[14] = 0x46
			copy(b[14+24:], b[14+20:14+28]) // UDP moves 4 bytes on
		}), true},
		{"v6", frame("fd00::1", "fd00::2", 4791, nil), true},
		{"v6 other port", frame("fd00::1", "fd00::2", 53, nil), false},
		{"v6 not udp", frame("fd00::1", "fd00::2", 4791, func(b []byte) { b[14+6] = 58 }), false},
		{"arp", frame("10.0.0.1", "10.0.0.2", 4791, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), false},
	}
	for _, tc := range tests {
		n, err := vm.Run(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if (n > 0) != tc.ok {
			t.Errorf("%s: filter returned %d, want accept=%v", tc.name, n, tc.ok)
		}
	}
}
