package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
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
