package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const srLine = " Selective repeat: ON\n"

// TestSelectiveRepeatFlag: --selective_repeat is RC's, listed in -h.
func TestSelectiveRepeatFlag(t *testing.T) {
	for _, args := range [][]string{
		{"write_bw", "-c", "UC", "--selective_repeat"},
		{"send_lat", "-c", "UD", "--selective_repeat"},
	} {
		k, _ := kindByName(args[0])
		if _, err := parseArgs(k, args[1:], io.Discard); err == nil || !strings.Contains(err.Error(), "--selective_repeat") {
			t.Errorf("%q: %v", args, err)
		}
	}
	k, _ := kindByName("write_bw")
	var h strings.Builder
	parseArgs(k, []string{"-h"}, &h)
	if !strings.Contains(h.String(), "-selective_repeat") {
		t.Errorf("help:\n%s", h.String())
	}
	c, err := parseArgs(k, []string{"-c", "UC", "--selective_repeat=false"}, io.Discard)
	if err != nil || c.selective || !c.selectiveSet {
		t.Errorf("--selective_repeat=false with UC: %+v, %v", c, err)
	}
}

// TestSelectiveRepeatTCP: over the TCP exchange, which cannot ask the
// peer, selective repeat is on when both sides give --selective_repeat,
// and the header and JSON say so; without it the header is perftest's.
func TestSelectiveRepeatTCP(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bw.json")
	so, co, _ := runPair(t, "write_bw", "-s", "4096", "-n", "100", "--selective_repeat", "--out_json", "--out_json_file", f)
	if !strings.Contains(so, srLine) || !strings.Contains(co, srLine) {
		t.Errorf("headers:\n%s\n%s", so, co)
	}
	for _, name := range []string{f, f + ".server"} {
		if b, err := os.ReadFile(name); err != nil || !strings.Contains(string(b), `"Selective_repeat": true`) {
			t.Errorf("%s: %s, %v", name, b, err)
		}
	}
	so, co, _ = runPair(t, "write_lat", "-s", "64", "-n", "20", "--out_json", "--out_json_file", f)
	if strings.Contains(so+co, "Selective") {
		t.Errorf("headers without --selective_repeat:\n%s\n%s", so, co)
	}
	if b, err := os.ReadFile(f); err != nil || strings.Contains(string(b), "Selective") {
		t.Errorf("json without --selective_repeat: %s, %v", b, err)
	}
}

// TestSelectiveRepeatCM: with -R the CM negotiates selective repeat for
// the test's QPs by default; --selective_repeat=false on either side
// leaves both on go-back-N.
func TestSelectiveRepeatCM(t *testing.T) {
	off := func(c *config) { c.selective, c.selectiveSet = false, true }
	for _, tc := range []struct {
		name  string
		tweak func(srv, cli *config)
		on    bool
	}{
		{"default", nil, true},
		{"server_off", func(srv, _ *config) { off(srv) }, false},
		{"client_off", func(_, cli *config) { off(cli) }, false},
	} {
		// Each run in a subtest: its devices take addresses from the
		// test's name.
		t.Run(tc.name, func(t *testing.T) {
			so, co, _, _ := cmPairWith(t, "write_lat", nil, tc.tweak, "-s", "64", "-n", "20")
			for _, out := range []string{so, co} {
				if strings.Contains(out, srLine) != tc.on || !tc.on && strings.Contains(out, "Selective") {
					t.Errorf("selective repeat should be %v:\n%s", tc.on, out)
				}
			}
		})
	}
}
