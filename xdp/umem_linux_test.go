package xdp

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestUMEMOnHugePages checks that the UMEM's mapping may take transparent
// huge pages whenever the kernel allows them for advised memory: without
// the advice, a kernel in the default madvise mode backs it with 4 KiB
// pages and every received frame costs a page walk.
func TestUMEMOnHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages: %v", err)
	}
	if strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are off")
	}
	const n = DefaultNumFrames * DefaultFrameSize
	m, err := mapUMEM(n)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if len(m) != n {
		t.Fatalf("mapped %d bytes, want %d", len(m), n)
	}
	m[0], m[n-1] = 1, 2 // writable end to end
	eligible, huge := vma(t, uintptr(unsafe.Pointer(&m[0])))
	if eligible != "1" {
		t.Errorf("THPeligible %q for the UMEM's mapping, want 1 (THP mode %s)", eligible, strings.TrimSpace(string(mode)))
	}
	t.Logf("AnonHugePages of the UMEM: %s", huge)
}

// vma returns the THPeligible and AnonHugePages fields of the mapping of
// this process that holds addr.
func vma(t *testing.T, addr uintptr) (eligible, huge string) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, found := false, false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			if found {
				break
			}
			in = lo <= addr && addr < hi
			found = in
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "THPeligible:"); ok {
			eligible = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			huge = strings.TrimSpace(v)
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	}
	return eligible, huge
}
