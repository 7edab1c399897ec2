package main

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchCPUProfileUnwritable: an unwritable -cpuprofile path stops the
// run before any namespace is made, with the file's error.
func TestBenchCPUProfileUnwritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bench needs root")
	}
	path := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	err := benchSideBySide([]string{"-cpuprofile", path, "-links", "udp", "-mtu", "1500", "-r", "1"}, io.Discard, io.Discard)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("bench with -cpuprofile %s: %v, want an error wrapping fs.ErrNotExist", path, err)
	}
}

// TestBenchFlags: -tests picks latency, bandwidth and message-rate tests
// (send_bw among them), ignores repeats and refuses unknown names; -h
// lists the tests and their sizes.
func TestBenchFlags(t *testing.T) {
	sb, prof, err := parseBench([]string{"-tests", "write_lat,write_bw,send_bw,write_bw", "-links", "afxdp", "-r", "3", "-cpuprofile", "x.prof"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sb.lat, []string{"write_lat"}) || !slices.Equal(sb.bw, []string{"write_bw", "send_bw"}) ||
		!slices.Equal(sb.links, []string{"afxdp"}) || sb.rounds != 3 || prof != "x.prof" {
		t.Errorf("lat %v bw %v links %v rounds %d profile %q", sb.lat, sb.bw, sb.links, sb.rounds, prof)
	}
	sb, _, err = parseBench(nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sb.bw, []string{"write_bw", "read_bw", "send_bw"}) || !slices.Equal(sb.mtus, []int{1500, 9000}) {
		t.Errorf("default bw %v mtus %v", sb.bw, sb.mtus)
	}
	for _, args := range [][]string{{"-tests", "write_lat,bogus_bw"}, {"-links", "rxe"}, {"-mtu", "1000"}, {"-r", "0"}, {"-n", "10"}} {
		if _, _, err := parseBench(args, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: %v, want ErrUsage", args, err)
		}
	}
	var help strings.Builder
	if _, _, err := parseBench([]string{"-h"}, &help, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-tests", "send_bw", "write_bw,send_bw at 64 B messages/s", "-blast"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not mention %q:\n%s", want, help.String())
		}
	}
}

// TestBwSizes: write_bw runs for bandwidth and message rate, read_bw for
// bandwidth, send_bw for message rate.
func TestBwSizes(t *testing.T) {
	for test, want := range map[string][]int{"write_bw": {65536, 64}, "read_bw": {65536}, "send_bw": {64}} {
		if got := bwSizes(test); !slices.Equal(got, want) {
			t.Errorf("bwSizes(%s) = %v, want %v", test, got, want)
		}
	}
	if !isRate("send_bw", 64) || isRate("write_bw", 65536) || isRate("read_bw", 64) {
		t.Error("isRate")
	}
}

// TestBenchPrint: the table sets write_lat against the RC floor's one-way
// time (its target) and the bare floors', and each message rate against
// the blast of its own frames.
func TestBenchPrint(t *testing.T) {
	sb := &sideBySide{cells: map[sbsKey]*sbsCell{}, rounds: 1, latIters: 1000, bwIters: 1000,
		mtus: []int{1500}, links: []string{"afxdp"}, lat: []string{"write_lat", "read_lat"}, bw: []string{"write_bw", "send_bw"}}
	for _, c := range []struct {
		test string
		size int
		link string
		v    float64
	}{
		{"floor-rtt", 2, "raw-rc", 10}, {"floor-rtt", 2, "raw-xdp", 4}, {"floor-rtt", 2, "raw-udp", 8},
		{"floor-rtt", 64, "raw-rc", 10}, {"floor-rtt", 64, "raw-xdp", 4}, {"floor-rtt", 64, "raw-udp", 8},
		{"floor-rtt", 4096, "raw-rc", 20}, {"floor-rtt", 4096, "raw-xdp", 5}, {"floor-rtt", 4096, "raw-udp", 8},
		{"floor-blast", 1024, "raw-xdp", 10}, {"floor-rate", 64, "write", 2}, {"floor-rate", 64, "send", 4}, {"floor-rate-loss", 64, "write", 12.4},
		{"write_lat", 2, "afxdp", 5.5}, {"write_lat", 64, "afxdp", 7}, {"write_lat", 4096, "afxdp", 12},
		{"read_lat", 2, "afxdp", 9},
		{"write_bw", 65536, "afxdp", 9}, {"write_bw", 64, "afxdp", 1.2}, {"send_bw", 64, "afxdp", 1},
	} {
		sb.add(sbsKey{1500, c.test, c.size, c.link}, c.v)
	}
	var out strings.Builder
	sb.print(&out, "env", time.Second)
	for _, want := range []string{
		"floor rtt/2      2 raw-rc         5.00 us   1.00   2.50   1.25            (1+1 packets each way)",
		"floor rtt/2   4096 raw-rc        10.00 us   1.00   4.00   2.50            (4+1 packets each way)",
		"rate           64 raw-xdp      2.00 Mpps          1.00                   WRITE Only frames, packets/s received (12 % of those sent lost)",
		"write_lat       2 afxdp          5.50 us   1.10   2.75   1.38         -  ok (≤ 1.2× rc)",
		"write_lat      64 afxdp          7.00 us   1.40   3.50   1.75         -  MISSED (≤ 1.2× rc)",
		"write_lat    4096 afxdp         12.00 us   1.20   4.80   3.00         -  ok (≤ 1.2× rc)",
		"read_lat        2 afxdp          9.00 us      -   2.25   1.12         -",
		"write_bw    65536 afxdp        9.00 Gb/s          0.90                -  ok (≥ 0.80 of blast)",
		"write_bw       64 afxdp        1.20 Mpps          0.60                -  ok (≥ 0.5 of rate)",
		"send_bw        64 afxdp        1.00 Mpps          0.25                -  MISSED (≥ 0.5 of rate)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
