package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// loopbackPair returns two loopback addresses of the test's own
// (127.x.y.1 and 127.x.y.2 from a hash of its name and the process), so
// that tests and the demo running at the same time on this machine never
// share a UDP port 4791.
func loopbackPair(t testing.TB) (srv, cli netip.Addr) {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", t.Name(), os.Getpid())
	v := h.Sum32()
	x, y := byte(v>>8)|1, byte(v)
	return netip.AddrFrom4([4]byte{127, x, y, 1}), netip.AddrFrom4([4]byte{127, x, y, 2})
}

// pairConfigs parses a test's flags for a server and a client on a
// loopback pair, the client's naming the server's address.
func pairConfigs(t *testing.T, test string, flags ...string) (srvCfg, cliCfg *config, srvAddr, cliAddr netip.Addr) {
	t.Helper()
	k, ok := kindByName(test)
	if !ok {
		t.Fatalf("no test %s", test)
	}
	srvAddr, cliAddr = loopbackPair(t)
	srvCfg, err := parseArgs(k, flags, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err = parseArgs(k, append(flags, srvAddr.String()), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Each side writes its own --out_json file.
	srvCfg.jsonTo += ".server"
	// Failure detection only: a healthy run takes well under a second.
	srvCfg.timeout, cliCfg.timeout = 2*time.Minute, 2*time.Minute
	return srvCfg, cliCfg, srvAddr, cliAddr
}

// runPair runs a test's server and client in this process with the given
// flags and returns both sides' output.
func runPair(t *testing.T, test string, flags ...string) (srvOut, cliOut string, pc pairCounters) {
	t.Helper()
	srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, test, flags...)
	var so, co bytes.Buffer
	pc, err := pair(context.Background(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co)
	if err != nil {
		t.Fatalf("%s: %v\nserver:\n%s\nclient:\n%s", test, err, so.String(), co.String())
	}
	return so.String(), co.String(), pc
}

// tableRows parses perftest's result table in out: the column headings
// and each row's values by heading.
func tableRows(t *testing.T, out string) []map[string]float64 {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "#bytes") {
			continue
		}
		// Headings are separated by two or more spaces, except the
		// first two.
		var heads []string
		for _, f := range strings.Split(strings.Replace(strings.TrimSpace(l), "#bytes #iterations", "#bytes  #iterations", 1), "  ") {
			if f = strings.TrimSpace(f); f != "" {
				heads = append(heads, f)
			}
		}
		var rows []map[string]float64
		for _, d := range lines[i+1:] {
			if strings.HasPrefix(d, "---") {
				return rows
			}
			fs := strings.Fields(d)
			if len(fs) != len(heads) {
				t.Fatalf("row %q has %d fields for %d headings %q", d, len(fs), len(heads), heads)
			}
			row := map[string]float64{}
			for j, f := range fs {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil {
					t.Fatalf("row %q: %v", d, err)
				}
				row[heads[j]] = v
			}
			rows = append(rows, row)
		}
		t.Fatalf("table without its closing line:\n%s", out)
	}
	t.Fatalf("no result table in:\n%s", out)
	return nil
}

// TestLoopback runs every test with both roles uroce over loopback and
// checks that the reports parse, describe what ran, and that the data
// crossed the link.
func TestLoopback(t *testing.T) {
	tests := []struct {
		test  string
		flags []string
		sizes []int
		iters int
		// receiver of the payload: "server", "client" or "both".
		receiver string
		// serverTable says whether the server prints a table too.
		serverTable bool
	}{
		{"write_lat", []string{"-s", "64", "-n", "200"}, []int{64}, 200, "both", true},
		{"write_lat", []string{"-s", "3000", "-n", "100", "-m", "1024"}, []int{3000}, 100, "both", true},
		{"read_lat", []string{"-s", "4096", "-n", "200"}, []int{4096}, 200, "client", false},
		{"send_lat", []string{"-s", "300", "-n", "200", "-r", "16"}, []int{300}, 200, "both", true},
		{"atomic_lat", []string{"-n", "200"}, []int{8}, 200, "client", false},
		{"atomic_lat", []string{"-n", "200", "-A", "CMP_AND_SWAP"}, []int{8}, 200, "client", false},
		{"atomic_bw", []string{"-n", "300"}, []int{8}, 300, "client", true},
		{"atomic_bw", []string{"-n", "300", "--atomic_type", "CMP_AND_SWAP", "-q", "2"}, []int{8}, 300, "client", true},
		{"write_bw", []string{"-s", "8192", "-n", "300", "-q", "2"}, []int{8192}, 300, "server", true},
		{"read_bw", []string{"-s", "5000", "-n", "300", "-m", "2048", "--report_gbits"}, []int{5000}, 300, "client", true},
		{"send_bw", []string{"-s", "2050", "-n", "300", "-t", "32", "-r", "64"}, []int{2050}, 300, "server", true},
		// -e: the same tests waiting in CQ.Wait instead of polling.
		{"write_lat", []string{"-s", "64", "-n", "100", "-e"}, []int{64}, 100, "both", true},
		{"read_lat", []string{"-s", "64", "-n", "100", "--events"}, []int{64}, 100, "client", false},
		{"send_lat", []string{"-s", "300", "-n", "100", "-r", "16", "-e"}, []int{300}, 100, "both", true},
		{"atomic_lat", []string{"-n", "100", "--use_event"}, []int{8}, 100, "client", false},
		{"write_bw", []string{"-s", "8192", "-n", "300", "-q", "2", "-e"}, []int{8192}, 300, "server", true},
		{"read_bw", []string{"-s", "5000", "-n", "300", "-e"}, []int{5000}, 300, "client", true},
		{"send_bw", []string{"-s", "2050", "-n", "300", "-t", "32", "-r", "64", "-e"}, []int{2050}, 300, "server", true},
		{"atomic_bw", []string{"-n", "300", "-e"}, []int{8}, 300, "client", true},
	}
	for _, tt := range tests {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			so, co, pc := runPair(t, tt.test, tt.flags...)
			rows := tableRows(t, co)
			if len(rows) != len(tt.sizes) {
				t.Fatalf("client printed %d rows, want %d:\n%s", len(rows), len(tt.sizes), co)
			}
			k, _ := kindByName(tt.test)
			for i, row := range rows {
				if int(row["#bytes"]) != tt.sizes[i] || int(row["#iterations"]) != tt.iters {
					t.Errorf("row %d: %v, want %d B x %d", i, row, tt.sizes[i], tt.iters)
				}
				if k.bw {
					avg := row["BW average[MB/sec]"] + row["BW average[Gb/sec]"]
					if avg <= 0 || row["MsgRate[Mpps]"] <= 0 {
						t.Errorf("row %d: no bandwidth: %v", i, row)
					}
				} else if !(row["t_min[usec]"] > 0 && row["t_min[usec]"] <= row["t_typical[usec]"] && row["t_typical[usec]"] <= row["t_max[usec]"]) {
					t.Errorf("row %d: latencies out of order: %v", i, row)
				}
			}
			events := slices.ContainsFunc(tt.flags, func(f string) bool { return f == "-e" || f == "--events" || f == "--use_event" })
			for _, out := range []string{so, co} {
				if strings.Contains(out, " Test with events. Using udp:") != events {
					t.Errorf("events line with -e %v:\n%s", events, out)
				}
			}
			if strings.Contains(so, "#bytes") != tt.serverTable {
				t.Errorf("server table printed: %v, want %v:\n%s", !tt.serverTable, tt.serverTable, so)
			}
			if tt.serverTable {
				tableRows(t, so)
			}
			// The payload crossed: the receiver got at least every
			// message's bytes.
			want := uint64(0)
			for _, s := range tt.sizes {
				want += uint64(s * tt.iters)
			}
			if tt.test == "write_bw" {
				want *= 2 // -q 2
			}
			if (tt.receiver == "server" || tt.receiver == "both") && pc.Server.RxBytes < want {
				t.Errorf("server received %d bytes, want at least %d", pc.Server.RxBytes, want)
			}
			if (tt.receiver == "client" || tt.receiver == "both") && pc.Client.RxBytes < want && k.verb != verbAtomic {
				t.Errorf("client received %d bytes, want at least %d", pc.Client.RxBytes, want)
			}
			// An atomic's original value comes in the AtomicAckETH,
			// not as payload: one response per iteration.
			if k.verb == verbAtomic && (pc.Client.RxPackets < uint64(tt.iters) || pc.Server.CompletedRecvs != 0) {
				t.Errorf("atomic: client received %d packets, want at least %d", pc.Client.RxPackets, tt.iters)
			}
		})
	}
}

// TestLoopbackAllSizes runs -a's loop (every size from 2 B to 8 MiB) for
// a latency and a bandwidth test, with few iterations.
func TestLoopbackAllSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2 × 16 MiB per size")
	}
	for _, test := range []string{"send_lat", "write_bw"} {
		t.Run(test, func(t *testing.T) {
			_, co, _ := runPair(t, test, "-a", "-n", "5")
			rows := tableRows(t, co)
			if len(rows) != 23 {
				t.Fatalf("%d rows, want 23:\n%s", len(rows), co)
			}
			for i, row := range rows {
				if int(row["#bytes"]) != 2<<i {
					t.Errorf("row %d is %v B", i, row["#bytes"])
				}
			}
		})
	}
}

// TestJSON checks --out_json: a file with the test's description and one
// result per size, with perftest's field names and the printed numbers.
func TestJSON(t *testing.T) {
	dir := t.TempDir()
	lat := filepath.Join(dir, "lat.json")
	_, co, _ := runPair(t, "read_lat", "-s", "64", "-n", "50", "--out_json", "--out_json_file", lat)
	var got struct {
		TestInfo map[string]any   `json:"test_info"`
		Results  []map[string]any `json:"results"`
	}
	b, err := os.ReadFile(lat)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.TestInfo["test"] != "RDMA_Read Latency Test" || got.TestInfo["Role"] != "client" || got.TestInfo["Number_of_qps"] != 1.0 {
		t.Errorf("test_info %v", got.TestInfo)
	}
	row := tableRows(t, co)[0]
	if srv, err := os.ReadFile(lat + ".server"); err != nil || !strings.Contains(string(srv), `"Role": "server"`) {
		t.Errorf("server's json: %s, %v", srv, err)
	}
	if len(got.Results) != 1 || got.Results[0]["MsgSize"] != 64.0 || got.Results[0]["n_iterations"] != 50.0 {
		t.Fatalf("results %v", got.Results)
	}
	for js, col := range map[string]string{"t_min": "t_min[usec]", "t_typical": "t_typical[usec]", "percentile_99.9": "99.9% percentile[usec]"} {
		v, ok := got.Results[0][js].(float64)
		if !ok || fmt.Sprintf("%.2f", v) != fmt.Sprintf("%.2f", row[col]) {
			t.Errorf("%s = %v, table says %v", js, got.Results[0][js], row[col])
		}
	}

	bw := filepath.Join(dir, "bw.json")
	runPair(t, "write_bw", "-s", "4096", "-n", "100", "--report_gbits", "--out_json", "--out_json_file", bw)
	b, err = os.ReadFile(bw)
	if err != nil {
		t.Fatal(err)
	}
	got.Results = nil
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.TestInfo["BW_units"] != "Gb/sec" || len(got.Results) != 1 || got.Results[0]["BW_average"].(float64) <= 0 || got.Results[0]["MsgSize"] != 4096.0 {
		t.Errorf("bw json: %s", b)
	}
}

func TestArgs(t *testing.T) {
	k, _ := kindByName("write_bw")
	c, err := parseArgs(k, []string{"-s", "64", "10.0.0.1", "-n", "7", "--report_gbits", "-q", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.peer != "10.0.0.1" || c.size != 64 || c.iters != 7 || !c.gbits || c.qps != 3 || c.port != 18515 || c.tx != 128 {
		t.Errorf("%+v", c)
	}
	k, _ = kindByName("write_lat")
	if c, _ = parseArgs(k, nil, io.Discard); c.size != 2 || c.iters != 1000 || c.peer != "" || c.link != "udp" {
		t.Errorf("write_lat defaults %+v", c)
	}
	for _, bad := range [][]string{{"-c", "UD"}, {"-m", "1500"}, {"-n", "2"}, {"--link", "rdma"}, {"a", "b"}, {"-s", "0"}} {
		if _, err := parseArgs(k, bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	k, _ = kindByName("atomic_lat")
	if c, err = parseArgs(k, nil, io.Discard); err != nil || c.size != 8 || c.atomic != "FETCH_AND_ADD" {
		t.Errorf("atomic defaults %+v, %v", c, err)
	}
	if _, err := parseArgs(k, []string{"-A", "SWAP"}, io.Discard); err == nil || !strings.Contains(err.Error(), "{CMP_AND_SWAP,FETCH_AND_ADD}") {
		t.Errorf("-A SWAP: %v", err)
	}
	k, _ = kindByName("read_bw")
	if _, err := parseArgs(k, []string{"-A", "CMP_AND_SWAP"}, io.Discard); err == nil {
		t.Error("-A accepted by read_bw")
	}
}

// TestAtomicType checks -A: the banner names the operation as perftest's
// does, and the work request is perftest's (add 1, or compare 0 and swap
// in 0).
func TestAtomicType(t *testing.T) {
	srv, _ := loopbackPair(t)
	dev, err := verbs.OpenAddr(srv, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, tt := range []struct {
		test, typ, title string
		op               verbs.WROpcode
		add              uint64
	}{
		{"atomic_lat", "FETCH_AND_ADD", "Atomic FETCH_AND_ADD Latency Test", verbs.WRFetchAdd, 1},
		{"atomic_lat", "CMP_AND_SWAP", "Atomic CMP_AND_SWAP Latency Test", verbs.WRCompareSwap, 0},
		{"atomic_bw", "FETCH_AND_ADD", "Atomic FETCH_AND_ADD BW Test", verbs.WRFetchAdd, 1},
		{"atomic_bw", "CMP_AND_SWAP", "Atomic CMP_AND_SWAP BW Test", verbs.WRCompareSwap, 0},
	} {
		k, _ := kindByName(tt.test)
		c, err := parseArgs(k, []string{"-A", tt.typ}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.title(); got != tt.title {
			t.Errorf("%s -A %s: title %q, want %q", tt.test, tt.typ, got, tt.title)
		}
		b := newBench(c, dev, false)
		mine, err := b.Setup(sysData(perftest.MTUFromBytes(1024)))
		if err != nil {
			t.Fatal(err)
		}
		b.rem = mine
		wr := b.prepare(0, 8)
		if wr.Opcode != tt.op || wr.CompareAdd != tt.add || wr.Swap != 0 || wr.RKey != mine[0].RKey {
			t.Errorf("%s -A %s: WR %+v", tt.test, tt.typ, wr)
		}
	}
}

// TestDemo runs the demo (on the test's own loopback addresses) and checks
// that it prints every test's table with a row per size, and the
// comparison with kernel UDP.
func TestDemo(t *testing.T) {
	srv, cli := loopbackPair(t)
	var b bytes.Buffer
	if err := demoAt(&b, srv, cli); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	out := b.String()
	for _, r := range demoRuns {
		i := strings.Index(out, "=== uroce-perf "+r.test+" ")
		if i < 0 {
			t.Fatalf("no %s in:\n%s", r.test, out)
		}
		rows := tableRows(t, out[i:])
		if len(rows) != len(r.sizes) {
			t.Errorf("%s: %d rows, want %d", r.test, len(rows), len(r.sizes))
		}
		for j, row := range rows {
			if int(row["#bytes"]) != r.sizes[j] || int(row["#iterations"]) != r.iters {
				t.Errorf("%s row %d: %v", r.test, j, row)
			}
		}
	}
	i := strings.Index(out, "against a kernel UDP ping-pong")
	if i < 0 {
		t.Fatalf("no comparison in:\n%s", out)
	}
	var n int
	for _, l := range strings.Split(out[i:], "\n") {
		fs := strings.Fields(l)
		if len(fs) == 9 && (fs[0] == "64" || fs[0] == "4096") {
			for _, f := range fs[1:] {
				if v, err := strconv.ParseFloat(f, 64); err != nil || v <= 0 {
					t.Errorf("comparison line %q: %q", l, f)
				}
			}
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d comparison lines, want 2:\n%s", n, out[i:])
	}
}

// TestCommandLine runs a client through the command line (run, as main
// does) against a server taking its connection from the test's listener.
func TestCommandLine(t *testing.T) {
	srv, cli := loopbackPair(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(srv.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	k, _ := kindByName("send_bw")
	scfg, err := parseArgs(k, []string{"-s", "1000", "-n", "200", "--ip", srv.String(), "-p", port}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var so bytes.Buffer
	srvErr := make(chan error, 1)
	go func() { srvErr <- runWith(context.Background(), scfg, ln, &so) }()
	var co, ce bytes.Buffer
	err = run([]string{"send_bw", "-s", "1000", srv.String(), "-n", "200", "--ip", cli.String(), "-p", port}, &co, &ce)
	if serr := <-srvErr; err != nil || serr != nil {
		t.Fatalf("client: %v (%s), server: %v\nclient:\n%s\nserver:\n%s", err, ce.String(), serr, co.String(), so.String())
	}
	for name, out := range map[string]string{"client": co.String(), "server": so.String()} {
		rows := tableRows(t, out)
		if len(rows) != 1 || rows[0]["#bytes"] != 1000 || rows[0]["#iterations"] != 200 {
			t.Errorf("%s: %v", name, rows)
		}
		if !strings.Contains(out, "Send BW Test") || !strings.Contains(out, "Device         : udp:") {
			t.Errorf("%s banner:\n%s", name, out)
		}
	}
	if !strings.Contains(so.String(), "Waiting for client to connect") {
		t.Errorf("server did not say it waits:\n%s", so.String())
	}
	if err := run([]string{"read_lat", "-c", "UC"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Errorf("UC: %v", err)
	}
	if err := run([]string{"bogus"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown test: %v", err)
	}
}

// TestWarmUp runs the latency tests with the bench's untimed iterations
// first: the report counts the timed ones, every iteration's payload
// crossed, and send_lat's receives were reposted through both loops
// without a receiver-not-ready NAK.
func TestWarmUp(t *testing.T) {
	const warm, iters, size = 512, 200, 64
	for _, tt := range []struct {
		test     string
		flags    []string
		receiver string
	}{
		{"write_lat", nil, "both"},
		{"send_lat", []string{"-r", "16"}, "both"},
		{"read_lat", nil, "client"},
	} {
		t.Run(tt.test, func(t *testing.T) {
			flags := append([]string{"-s", strconv.Itoa(size), "-n", strconv.Itoa(iters)}, tt.flags...)
			srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, tt.test, flags...)
			srvCfg.warm, cliCfg.warm = warm, warm
			var so, co bytes.Buffer
			pc, err := pair(context.Background(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co)
			if err != nil {
				t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
			}
			rows := tableRows(t, co.String())
			if len(rows) != 1 || int(rows[0]["#iterations"]) != iters {
				t.Fatalf("client report %v, want one row of %d iterations", rows, iters)
			}
			want := uint64(size * (warm + iters))
			if tt.receiver == "both" && (pc.Server.RxBytes < want || pc.Client.RxBytes < want) {
				t.Errorf("received %d and %d bytes, want at least %d a side", pc.Server.RxBytes, pc.Client.RxBytes, want)
			}
			if tt.receiver == "client" && pc.Client.RxBytes < want {
				t.Errorf("client received %d bytes, want at least %d", pc.Client.RxBytes, want)
			}
			if n := pc.Server.RNRNAKsSent + pc.Client.RNRNAKsSent; n != 0 {
				t.Errorf("%d RNR NAKs", n)
			}
		})
	}
}
