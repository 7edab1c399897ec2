package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags checks the command line: -h is not an error, and what is
// wrong is said before any file is read.
func TestFlags(t *testing.T) {
	path := filepath.Join(captureDir, "ib_write_lat.pcap")
	for _, tc := range []struct {
		args   []string
		err    string // "": no error
		stderr string
	}{
		{[]string{"-h"}, "", "usage: uroce-dump -r FILE | -i IFACE"},
		{[]string{"--help"}, "", "stop after n packets shown (0: no limit)"},
		{[]string{"-r", path, "-c", "-3"}, "-c -3: the packet count must be 0 (no limit) or more", ""},
		{[]string{"-r", path, "-c", "x"}, `invalid value "x" for flag -c`, "usage: uroce-dump"},
		{[]string{"-r", path, "-q", "-c", "0"}, "", ""},
		{[]string{}, errUsage.Error(), ""},
		{[]string{"-r", path, "extra"}, errUsage.Error(), ""},
		{[]string{"-r", path, "-i", "lo"}, errUsage.Error(), ""},
		{[]string{"-r", path, "--qp", "0x1000000"}, "--qp: ", ""},
	} {
		var stderr bytes.Buffer
		err := run(tc.args, io.Discard, &stderr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
		if !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: stderr %q, want %q", tc.args, stderr.String(), tc.stderr)
		}
		if err != nil && strings.Contains(stderr.String(), err.Error()) {
			t.Errorf("%q: the error is printed twice:\n%s", tc.args, stderr.String())
		}
	}
}
