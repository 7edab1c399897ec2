package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestStats runs write_bw with -stats and checks that both sides print
// their counters on one line and put them in --out_json: the client sent
// every WRITE packet, the server received them, and any retransmission
// had a cause the counters show (a timeout or a NAK): loopback loses
// nothing, but a loaded machine can delay an ACK past the timeout.
func TestStats(t *testing.T) {
	const size, iters = 4096, 50
	js := filepath.Join(t.TempDir(), "out.json")
	so, co, _ := runPair(t, "write_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters), "-m", "1024",
		"-stats", "--out_json", "--out_json_file", js)
	line := regexp.MustCompile(`(?m)^counters: \{.*\}$`)
	field := func(out, name string) uint64 {
		t.Helper()
		l := line.FindString(out)
		if l == "" {
			t.Fatalf("no counters line in:\n%s", out)
		}
		m := regexp.MustCompile(`\b` + name + `:(\d+)`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("counters line lacks %s: %s", name, l)
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		return v
	}
	// 4096-byte WRITEs at IB MTU 1024 are four packets each.
	if n := field(co, "TxPackets"); n < size/1024*iters {
		t.Errorf("client sent %d packets, want at least %d", n, size/1024*iters)
	}
	if n := field(so, "RxPackets"); n < size/1024*iters {
		t.Errorf("server received %d packets, want at least %d", n, size/1024*iters)
	}
	if n := field(co, "Retransmits"); n != 0 && field(co, "Timeouts")+field(co, "SeqNAKsRcvd")+field(co, "RNRNAKsRcvd") == 0 {
		t.Errorf("client retransmitted %d packets with no timeout or NAK to cause it", n)
	}
	for _, path := range []string{js, js + ".server"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Counters *struct{ TxPackets, RxPackets uint64 } `json:"counters"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc.Counters == nil || doc.Counters.TxPackets == 0 || doc.Counters.RxPackets == 0 {
			t.Errorf("%s: counters %+v:\n%s", path, doc.Counters, b)
		}
	}
}
