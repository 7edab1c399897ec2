package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/verbs"
)

// rcPayloads returns the payloads of the capture's RoCEv2 packets with BTH
// opcode op, in capture order.
func rcPayloads(t *testing.T, name string, op byte) [][]byte {
	t.Helper()
	f, err := pcapfile.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range f.Records {
		b := r.Data
		if len(b) < 14+20+8+12 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14+9] != 17 {
			continue
		}
		ip := b[14:]
		ihl := int(ip[0]&0xf) * 4
		udp := ip[ihl:binary.BigEndian.Uint16(ip[2:])]
		if binary.BigEndian.Uint16(udp[2:]) != 4791 {
			continue
		}
		bth := udp[8:]
		if bth[0] != op {
			continue
		}
		hdr := 12
		if op == 16 { // READ Response Only: BTH, AETH
			hdr += 4
		}
		pad := int(bth[1]>>4) & 3
		out = append(out, bth[hdr:len(bth)-4-pad])
	}
	return out
}

// TestCapture checks the program's wire formats against real rping on rxe
// (server and client with -C 5 -S 64): every SEND is a 16-byte
// advertisement of 64 bytes or the server's go ahead, and every READ
// response carries the ping our fill writes.
func TestCapture(t *testing.T) {
	const capture = "../../testdata/rxe-captures/rping.pcap"
	sends := rcPayloads(t, capture, 4)
	if len(sends) != 20 {
		t.Fatalf("%d SENDs, want 20 (4 per ping)", len(sends))
	}
	for i, p := range sends {
		in, err := parseInfo(p)
		if err != nil {
			t.Fatalf("SEND %d: %v", i, err)
		}
		if in.Size != 64 && in != (info{}) {
			t.Errorf("SEND %d: %+v, want 64 bytes advertised (or a go ahead)", i, in)
		}
		var b [infoSize]byte
		in.marshal(b[:])
		if !bytes.Equal(b[:], p) {
			t.Errorf("SEND %d marshals to %x, want %x", i, b, p)
		}
	}
	reads := rcPayloads(t, capture, 16)
	if len(reads) != 5 {
		t.Fatalf("%d READ responses, want 5", len(reads))
	}
	start := byte(65)
	for i, p := range reads {
		want := make([]byte, 64)
		fill(want, i, start)
		start++
		if !bytes.Equal(p, want) {
			t.Errorf("ping %d: read %q, want %q", i, p, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-s"}, true},
		{[]string{"-c", "-a", "10.0.0.1", "-v", "-V", "-C", "10", "-S", "100"}, true},
		{[]string{"-c"}, false},
		{[]string{"-s", "-c"}, false},
		{[]string{}, false},
		{[]string{"-s", "-S", "25"}, false},
		{[]string{"-s", "-S", "65536"}, false},
		{[]string{"-s", "-C", "-1"}, false},
		{[]string{"-s", "-p", "0"}, false},
	} {
		_, err := parseFlags(tc.args, &strings.Builder{})
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}

// syncBuf is a writer both sides' goroutines may print to.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoopback runs the server and the client against each other over the
// kernel's loopback, every CM MAD and RC packet through real sockets.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ count, size int }{{1, 64}, {10, 64}, {3, 5000}, {2, maxSize}} {
		t.Run(fmt.Sprintf("C%d-S%d", tc.count, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var srvOut, srvErr, cliOut syncBuf
			serr, cerr := loopback.Run(ctx, func(d *verbs.Device, listening func()) error {
				return run(ctx, d, options{server: true, port: 7174, size: tc.size, verbose: true,
					listening: listening}, &srvOut, &srvErr)
			}, func(d *verbs.Device) error {
				return run(ctx, d, options{client: true, addr: loopback.B.String(), port: 7174, count: tc.count, size: tc.size,
					verbose: true, validate: true}, &cliOut, &cliOut)
			})
			if cerr != nil {
				t.Fatalf("client: %v\n%s", cerr, cliOut.String())
			}
			if serr != nil {
				t.Fatalf("server: %v\n%s", serr, srvErr.String())
			}
			cli := strings.Split(strings.TrimSuffix(cliOut.String(), "\n"), "\n")
			srv := strings.Split(strings.TrimSuffix(srvOut.String(), "\n"), "\n")
			if len(cli) != tc.count || len(srv) != tc.count {
				t.Fatalf("%d client and %d server lines, want %d:\n%s\n%s", len(cli), len(srv), tc.count, cliOut.String(), srvOut.String())
			}
			start := byte(65)
			for i := range tc.count {
				want := make([]byte, tc.size)
				fill(want, i, start)
				start++
				if cli[i] != "ping data: "+string(cstring(want)) || srv[i] != "server ping data: "+string(cstring(want)) {
					t.Fatalf("ping %d:\n%.80s\n%.80s\nwant %.80q", i, cli[i], srv[i], want)
				}
			}
			if !strings.Contains(srvErr.String(), "server DISCONNECT EVENT") {
				t.Errorf("server stderr %q", srvErr.String())
			}
		})
	}
}

// FuzzParseInfo: any bytes either parse to an advertisement that marshals
// back to them, or are refused for their length.
func FuzzParseInfo(f *testing.F) {
	f.Add(make([]byte, infoSize))
	f.Add([]byte{0, 0, 0x7f, 0xd7, 0xf8, 0xa5, 0x30, 0, 0, 0, 4, 1, 0, 0, 0, 0x40})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseInfo(b)
		if (err == nil) != (len(b) == infoSize) {
			t.Fatalf("%d bytes: %v", len(b), err)
		}
		if err != nil {
			return
		}
		var out [infoSize]byte
		in.marshal(out[:])
		if !bytes.Equal(out[:], b) {
			t.Fatalf("%x parses to %+v, which marshals to %x", b, in, out)
		}
	})
}
