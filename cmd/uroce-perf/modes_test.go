package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLoopbackDuration runs the bandwidth tests for a time (-D): one row
// on each side, whose count is what completed in the measured window, at
// a rate and without a peak, as perftest reports duration mode.
func TestLoopbackDuration(t *testing.T) {
	for _, tt := range []struct {
		test  string
		flags []string
	}{
		{"write_bw", []string{"-s", "4096", "-D", "1"}},
		{"read_bw", []string{"-s", "4096", "-D", "1", "-q", "2"}},
		{"send_bw", []string{"-s", "2048", "--duration", "1"}},
		{"atomic_bw", []string{"-D", "3", "-f", "1"}},
	} {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			so, co, _ := runPair(t, tt.test, tt.flags...)
			for side, out := range map[string]string{"client": co, "server": so} {
				rows := tableRows(t, out)
				if len(rows) != 1 {
					t.Fatalf("%s: %d rows:\n%s", side, len(rows), out)
				}
				r := rows[0]
				if r["#iterations"] < 1 || r["BW average[MB/sec]"] <= 0 || r["MsgRate[Mpps]"] <= 0 || r["BW peak[MB/sec]"] != 0 {
					t.Errorf("%s: %v", side, r)
				}
			}
		})
	}
}

// TestLoopbackBidirectional runs -b: both sides send, the banner says
// Bidirectional, and both print the sum of the two sides' reports.
func TestLoopbackBidirectional(t *testing.T) {
	for _, tt := range []struct {
		test  string
		flags []string
		size  int
		// sum: both sides print the same sum (counting iterations).
		sum bool
	}{
		{"write_bw", []string{"-s", "4096", "-n", "300", "-b"}, 4096, true},
		{"read_bw", []string{"-s", "4096", "-n", "300", "--bidirectional", "-q", "2"}, 4096, true},
		{"send_bw", []string{"-s", "2048", "-n", "300", "-b", "-r", "64"}, 2048, true},
		{"atomic_bw", []string{"-n", "300", "-b"}, 8, true},
		{"write_bw", []string{"-s", "4096", "-D", "1", "-b"}, 4096, true},
		// send_bw -b -D: each side prints its own count.
		{"send_bw", []string{"-s", "1024", "-D", "1", "-b"}, 1024, false},
	} {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			so, co, pc := runPair(t, tt.test, tt.flags...)
			var rows []map[string]float64
			for side, out := range map[string]string{"client": co, "server": so} {
				if !strings.Contains(out, " Bidirectional BW Test") {
					t.Errorf("%s banner:\n%s", side, out)
				}
				r := tableRows(t, out)
				if len(r) != 1 || r[0]["#bytes"] != float64(tt.size) || r[0]["BW average[MB/sec]"] <= 0 {
					t.Fatalf("%s: %v\n%s", side, r, out)
				}
				rows = append(rows, r[0])
			}
			if tt.sum && (rows[0]["BW average[MB/sec]"] != rows[1]["BW average[MB/sec]"] || rows[0]["MsgRate[Mpps]"] != rows[1]["MsgRate[Mpps]"]) {
				t.Errorf("sides print different sums: %v, %v", rows[0], rows[1])
			}
			// Both directions carried payload (atomics carry theirs in
			// the AtomicAckETH: count the packets instead).
			if tt.test == "atomic_bw" {
				if pc.Server.RxPackets < 300 || pc.Client.RxPackets < 300 {
					t.Errorf("packets: server %d, client %d", pc.Server.RxPackets, pc.Client.RxPackets)
				}
			} else if want := uint64(300 * tt.size); pc.Server.RxBytes < want || pc.Client.RxBytes < want {
				t.Errorf("received: server %d, client %d bytes, want at least %d each", pc.Server.RxBytes, pc.Client.RxBytes, want)
			}
		})
	}
}

// TestLoopbackRunInfinitely runs --run_infinitely for two reports a side
// (the test's stand-in for an interrupt): a row every -D seconds.
func TestLoopbackRunInfinitely(t *testing.T) {
	for _, tt := range []struct {
		test  string
		flags []string
		// serverRows: the write_bw server waits and prints nothing.
		serverRows int
	}{
		{"write_bw", []string{"-s", "4096", "-D", "1", "--run_infinitely"}, 0},
		{"send_bw", []string{"-s", "2048", "-D", "1", "--run_infinitely"}, 2},
		{"read_bw", []string{"-s", "4096", "-D", "1", "--run_infinitely", "-b"}, 2},
	} {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, tt.test, tt.flags...)
			srvCfg.maxReports, cliCfg.maxReports = 2, 2
			var so, co bytes.Buffer
			if _, err := pair(context.Background(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co); err != nil {
				t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
			}
			rows := tableRows(t, co.String())
			if len(rows) != 2 {
				t.Fatalf("client: %d rows, want 2:\n%s", len(rows), co.String())
			}
			for _, r := range rows {
				if r["#iterations"] < 1 || r["BW average[MB/sec]"] <= 0 || r["BW peak[MB/sec]"] != 0 {
					t.Errorf("row %v", r)
				}
			}
			if tt.serverRows == 0 && strings.Contains(so.String(), "#bytes") {
				t.Errorf("server printed a table:\n%s", so.String())
			} else if tt.serverRows > 0 && len(tableRows(t, so.String())) != tt.serverRows {
				t.Errorf("server rows:\n%s", so.String())
			}
		})
	}
}

// TestRunInfinitelyInterrupt: SIGINT ends a write_bw client's
// --run_infinitely with the closing exchange, as perftest 25.01's
// handle_sigint, and the server says that the client closed.
func TestRunInfinitelyInterrupt(t *testing.T) {
	srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, "write_bw", "-s", "4096", "-D", "1", "--run_infinitely")
	cliCfg.interrupt = make(chan os.Signal, 1)
	time.AfterFunc(1500*time.Millisecond, func() { cliCfg.interrupt <- os.Interrupt })
	var so, co bytes.Buffer
	if _, err := pair(context.Background(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co); err != nil {
		t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
	}
	// At least one report row, then perftest's line, then the closing one.
	if !strings.Contains(co.String(), "\n 4096       ") || !strings.Contains(co.String(), "\n\n User stopped traffic\n---") {
		t.Errorf("client:\n%s", co.String())
	}
	if !strings.Contains(so.String(), " Client closed connection\n") {
		t.Errorf("server:\n%s", so.String())
	}
}

// TestModeArgs: the combinations perftest refuses are refused with its
// reasons, and -D's margin defaults to a quarter of it.
func TestModeArgs(t *testing.T) {
	for _, tt := range []struct {
		test string
		args []string
		err  string
	}{
		{"write_lat", []string{"-b"}, "bidirectional is only available in BW tests"},
		{"send_lat", []string{"--run_infinitely"}, "--run_infinitely exists only in BW tests"},
		{"read_lat", []string{"-D", "5"}, "-D (perftest's duration mode) is not supported in latency tests"},
		{"write_bw", []string{"-D", "5", "-e"}, "duration mode (-D) doesn't work with events"},
		{"write_bw", []string{"--run_infinitely", "-e"}, "--run_infinitely does not support events"},
		{"send_bw", []string{"--run_infinitely", "-b"}, "not supported in the SEND bidirectional BW test"},
		{"write_bw", []string{"-D", "5", "-a"}, "doesn't support running on all sizes"},
		{"write_bw", []string{"-D", "4", "-f", "2"}, "more than twice the margin"},
		{"write_bw", []string{"-D", "-1"}, "must be positive"},
	} {
		k, _ := kindByName(tt.test)
		if _, err := parseArgs(k, tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %q: %v, want %q", tt.test, tt.args, err, tt.err)
		}
	}
	k, _ := kindByName("write_bw")
	c, err := parseArgs(k, []string{"-D", "10", "-b"}, io.Discard)
	if err != nil || c.margin != 2 || c.duration != 10 || c.title() != "RDMA_Write Bidirectional BW Test" {
		t.Errorf("%+v, %v", c, err)
	}
	if c, err = parseArgs(k, []string{"--run_infinitely"}, io.Discard); err != nil || c.duration != 5 || c.margin != 1 {
		t.Errorf("--run_infinitely: %+v, %v", c, err)
	}
}

// TestLoopbackUD runs send_lat and send_bw on UD QPs (-c UD): datagrams
// of at most one MTU, a larger -s cut to it and -a stopping there, as
// perftest's UD tests do.
func TestLoopbackUD(t *testing.T) {
	for _, tt := range []struct {
		test  string
		flags []string
		sizes []int
		iters int
	}{
		{"send_lat", []string{"-c", "UD", "-s", "64", "-n", "200"}, []int{64}, 200},
		{"send_lat", []string{"--connection=UD", "-a", "-n", "20", "-m", "1024"}, []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, 20},
		{"send_bw", []string{"-c", "UD", "-s", "1024", "-n", "300", "-t", "16"}, []int{1024}, 300},
		{"send_bw", []string{"-c", "UD", "-n", "200", "-m", "2048", "-t", "16"}, []int{2048}, 200},
	} {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			so, co, pc := runPair(t, tt.test, tt.flags...)
			for side, out := range map[string]string{"client": co, "server": so} {
				if !strings.Contains(out, " Connection type : UD\t") {
					t.Errorf("%s banner:\n%s", side, out)
				}
				rows := tableRows(t, out)
				if len(rows) != len(tt.sizes) {
					t.Fatalf("%s: %d rows, want %d:\n%s", side, len(rows), len(tt.sizes), out)
				}
				for i, r := range rows {
					if int(r["#bytes"]) != tt.sizes[i] || int(r["#iterations"]) != tt.iters {
						t.Errorf("%s row %d: %v", side, i, r)
					}
				}
			}
			want := uint64(0)
			for _, s := range tt.sizes {
				want += uint64(s * tt.iters)
			}
			if pc.Server.RxBytes < want {
				t.Errorf("server received %d bytes, want at least %d", pc.Server.RxBytes, want)
			}
		})
	}
}

// TestLoopbackUC: the write and send tests on UC QPs (-c UC) between two
// uroce-perf over loopback: perftest's reports, and no ACK on the wire.
func TestLoopbackUC(t *testing.T) {
	for _, tt := range []struct {
		test  string
		flags []string
		sizes []int
		iters int
	}{
		{"write_lat", []string{"-c", "UC", "-s", "64", "-n", "200"}, []int{64}, 200},
		{"send_lat", []string{"-c", "UC", "-s", "3000", "-n", "200"}, []int{3000}, 200},
		// The bandwidth tests' client sends without waiting for
		// anything: kept small, so that the kernel's loopback drops
		// none of it on a busy machine (UC would not recover it).
		{"write_bw", []string{"-c", "UC", "-s", "4096", "-n", "100"}, []int{4096}, 100},
		{"send_bw", []string{"--connection=UC", "-s", "1024", "-n", "100", "-t", "16"}, []int{1024}, 100},
	} {
		t.Run(tt.test, func(t *testing.T) {
			so, co, pc := runPair(t, tt.test, tt.flags...)
			for side, out := range map[string]string{"client": co, "server": so} {
				if !strings.Contains(out, " Connection type : UC\t") {
					t.Errorf("%s banner:\n%s", side, out)
				}
				rows := tableRows(t, out)
				if len(rows) != len(tt.sizes) {
					t.Fatalf("%s: %d rows, want %d:\n%s", side, len(rows), len(tt.sizes), out)
				}
				for i, r := range rows {
					if int(r["#bytes"]) != tt.sizes[i] || int(r["#iterations"]) != tt.iters {
						t.Errorf("%s row %d: %v", side, i, r)
					}
				}
			}
			want := uint64(0)
			for _, s := range tt.sizes {
				want += uint64(s * tt.iters)
			}
			// write_bw's server has nothing to wait for: a packet the
			// loopback dropped shows only here, so it is not held
			// against the run.
			if pc.Server.RxBytes < want && (tt.test != "write_bw" || pc.Server.RxBytes == 0) {
				t.Errorf("server received %d bytes, want at least %d", pc.Server.RxBytes, want)
			}
			// The bandwidth tests' server sends nothing back over
			// RoCE (the results go over TCP): an RC client would
			// have ACKs.
			if strings.HasSuffix(tt.test, "_bw") && pc.Client.RxPackets != 0 {
				t.Errorf("the client received %d packets", pc.Client.RxPackets)
			}
		})
	}
}

// TestConnArgs: -c takes RC, UC for the write and send tests, and UD for
// the send tests; the other types perftest knows are named as
// unsupported, anything else invalid.
func TestConnArgs(t *testing.T) {
	for _, tt := range []struct {
		test, conn string
		err        string // empty: accepted
	}{
		{"send_lat", "UD", ""},
		{"send_bw", "ud", ""},
		{"write_bw", "RC", ""},
		{"write_lat", "UD", "UD connection only possible in SEND tests"},
		{"send_lat", "UC", ""},
		{"write_bw", "uc", ""},
		{"read_lat", "UC", "UC connection not possible in READ/ATOMIC verbs"},
		{"atomic_bw", "UC", "UC connection not possible in READ/ATOMIC verbs"},
		{"send_bw", "XRC", "(perftest's connection type XRC) is not supported"},
		{"send_bw", "DC", "(perftest's connection type DC) is not supported"},
		{"send_bw", "SRD", "(perftest's connection type SRD) is not supported"},
		{"send_bw", "XYZ", "invalid, choose from {RC,UC,UD,XRC,DC,SRD}"},
	} {
		k, _ := kindByName(tt.test)
		_, err := parseArgs(k, []string{"-c", tt.conn}, io.Discard)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s -c %s: %v, want %q", tt.test, tt.conn, err, tt.err)
		}
	}
	k, _ := kindByName("send_bw")
	if c, _ := parseArgs(k, []string{"-c", "UD"}, io.Discard); c.rx != 5000 {
		t.Errorf("UD send_bw rx depth %d, want the iterations", c.rx)
	}
	if c, _ := parseArgs(k, []string{"-c", "UC"}, io.Discard); c.rx != 5000 || c.inline != 0 {
		t.Errorf("UC send_bw rx depth %d, want the iterations; inline %d, want RC's", c.rx, c.inline)
	}
	if _, err := parseArgs(k, []string{"-c", "UC", "-R"}, io.Discard); err == nil || !strings.Contains(err.Error(), "UC is not supported in librdmacm") {
		t.Errorf("UC -R: %v", err)
	}
	k, _ = kindByName("send_lat")
	if c, _ := parseArgs(k, []string{"-c", "UD", "-r", "64"}, io.Discard); c.rx != 64 || c.inline != 188 {
		t.Errorf("UD send_lat -r 64: rx %d, inline %d", c.rx, c.inline)
	}
	rc, _ := parseArgs(k, nil, io.Discard)
	if c, _ := parseArgs(k, []string{"-c", "UC"}, io.Discard); c.inline != rc.inline {
		t.Errorf("UC send_lat inline %d, want RC's %d", c.inline, rc.inline)
	}
}

// TestUDLoss: a UD send_bw server whose datagrams do not all come (here
// the client sends fewer than the server waits for) reports what came
// after --timeout, as perftest's check_alive does, instead of failing.
func TestUDLoss(t *testing.T) {
	srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, "send_bw", "-c", "UD", "-s", "512", "-n", "300", "-t", "16")
	cliCfg.iters = 200
	srvCfg.timeout = 2 * time.Second
	var so, co, se bytes.Buffer
	srvCfg.notice = &se
	if _, err := pair(context.Background(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co); err != nil {
		t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
	}
	rows := tableRows(t, so.String())
	if len(rows) != 1 || rows[0]["#iterations"] != 200 || rows[0]["BW average[MB/sec]"] <= 0 {
		t.Errorf("server rows %v", rows)
	}
	if !strings.Contains(se.String(), "total received 200, total iterations required 300") {
		t.Errorf("server notice %q", se.String())
	}
}
