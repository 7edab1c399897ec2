package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
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
