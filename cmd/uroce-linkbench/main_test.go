package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestRoot checks that -h says the tool needs root, and that without root
// it stops with a message saying why, before making anything.
func TestRoot(t *testing.T) {
	var buf bytes.Buffer
	flag.CommandLine.SetOutput(&buf)
	defer flag.CommandLine.SetOutput(nil)
	usage()
	for _, want := range []string{"usage: sudo uroce-linkbench", "It needs root.", "-sizes"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("usage has no %q:\n%s", want, buf.String())
		}
	}
	for _, tc := range []struct {
		euid int
		want error
	}{{0, nil}, {1000, errNotRoot}, {65534, errNotRoot}} {
		if err := needRoot(tc.euid); err != tc.want {
			t.Errorf("euid %d: %v, want %v", tc.euid, err, tc.want)
		}
	}
	if msg := errNotRoot.Error(); !strings.HasPrefix(msg, "needs root: ") || !strings.Contains(msg, "sudo") {
		t.Errorf("message %q", msg)
	}
}
