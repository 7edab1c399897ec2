package bpf

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// frame builds an Ethernet frame: optional 802.1Q tag, then an IPv4 or IPv6
// header with protocol proto and, for UDP/TCP, ports 0xc000 -> dport.
func frame(vlan bool, v6 bool, proto uint8, dport uint16, fragOff uint16) []byte {
	b := make([]byte, 0, 128)
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1)
	if vlan {
		b = append(b, 0x81, 0x00, 0x00, 0x05)
	}
	if v6 {
		b = append(b, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], 8+16)
		ip[6] = proto
		ip[7] = 64
		ip[8], ip[23] = 0xfd, 1
		ip[24], ip[39] = 0xfd, 2
		b = append(b, ip...)
	} else {
		b = append(b, 0x08, 0x00)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], 20+8+16)
		binary.BigEndian.PutUint16(ip[6:], fragOff)
		ip[8] = 64
		ip[9] = proto
		copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		b = append(b, ip...)
	}
	l4 := make([]byte, 8+16)
	binary.BigEndian.PutUint16(l4[0:], 0xc000)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint16(l4[4:], 8+16)
	return append(b, l4...)
}

func arp() []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}
	return append(b, make([]byte, 28)...)
}

func TestVerdicts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: loading BPF programs needs root")
	}
	p, err := Load(Options{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const (
		udp = 17
		tcp = 6
		df  = 0x4000
	)
	tests := []struct {
		name string
		in   []byte
		roce bool
	}{
		{"ipv4 roce", frame(false, false, udp, 4791, df), true},
		{"ipv6 roce", frame(false, true, udp, 4791, 0), true},
		{"vlan ipv4 roce", frame(true, false, udp, 4791, df), true},
		{"vlan ipv6 roce", frame(true, true, udp, 4791, 0), true},
		{"ipv4 other udp", frame(false, false, udp, 4792, df), false},
		{"ipv6 other udp", frame(false, true, udp, 53, 0), false},
		{"ipv4 tcp 4791", frame(false, false, tcp, 4791, df), false},
		{"ipv6 tcp 4791", frame(false, true, tcp, 4791, 0), false},
		{"ipv4 icmp", frame(false, false, 1, 0, 0), false},
		{"ipv4 first fragment", frame(false, false, udp, 4791, 0x2000), false},
		{"ipv4 later fragment", frame(false, false, udp, 4791, 0x0010), false},
		{"arp", arp(), false},
		{"truncated udp", frame(false, false, udp, 4791, df)[:14+20+4], false},
		{"bare ethernet ipv4", frame(false, false, udp, 4791, df)[:14], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := p.Counters()
			if err != nil {
				t.Fatal(err)
			}
			ret, err := p.objs.UroceXdp.Run(&ebpf.RunOptions{Data: tc.in})
			if err != nil {
				t.Fatalf("test run: %v", err)
			}
			// No socket is registered, so RoCE falls back to XDP_PASS too;
			// the counters tell which branch the program took.
			if ret != 2 /* XDP_PASS */ {
				t.Fatalf("verdict %d, want XDP_PASS", ret)
			}
			after, err := p.Counters()
			if err != nil {
				t.Fatal(err)
			}
			gotRoCE := after.NoSocket - before.NoSocket
			gotPass := after.Passed - before.Passed
			if tc.roce && (gotRoCE != 1 || gotPass != 0) {
				t.Errorf("RoCE frame: no-socket +%d, passed +%d; want +1, +0", gotRoCE, gotPass)
			}
			if !tc.roce && (gotRoCE != 0 || gotPass != 1) {
				t.Errorf("other frame: no-socket +%d, passed +%d; want +0, +1", gotRoCE, gotPass)
			}
		})
	}
}

func TestQueueRange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: loading BPF programs needs root")
	}
	p, err := Load(Options{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Register(2, 0); err == nil {
		t.Error("Register(2) on a 2-queue map succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(0, 0); err != ErrClosed {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
}
