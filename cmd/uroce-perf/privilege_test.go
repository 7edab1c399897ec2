package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestPrivilegeError: an EPERM from opening AF_XDP without privileges
// names the missing capabilities and root instead of cilium/ebpf's
// MEMLOCK hint, and keeps the EPERM for errors.Is; with every capability
// present, or for another error, the error is left as it is.
func TestPrivilegeError(t *testing.T) {
	memlock := fmt.Errorf("load program: map stats: map create: %w (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", syscall.EPERM)
	other := fmt.Errorf("interface %q: %w", "eth9", syscall.ENODEV)
	const all = 1<<capNetAdmin | 1<<capNetRaw | 1<<capBPF
	tests := []struct {
		name    string
		err     error
		caps    uint64
		same    bool
		missing []string
	}{
		{"unprivileged", memlock, 0, false, []string{"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF"}},
		{"no bpf", memlock, 1<<capNetAdmin | 1<<capNetRaw, false, []string{"CAP_BPF"}},
		{"no net_raw", memlock, 1<<capNetAdmin | 1<<capBPF, false, []string{"CAP_NET_RAW"}},
		{"sys_admin for bpf", memlock, 1<<capNetAdmin | 1<<capNetRaw | 1<<capSysAdmin, true, nil},
		{"root", memlock, ^uint64(0), true, nil},
		{"all three", memlock, all, true, nil},
		{"not EPERM", other, 0, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := privilegeError(tt.err, tt.caps)
			if tt.same {
				if got != tt.err {
					t.Errorf("got %v, want the error unchanged", got)
				}
				return
			}
			msg := got.Error()
			want := "--link afxdp needs privileges this process lacks (" + strings.Join(tt.missing, ", ") + "): run it as root"
			if !strings.Contains(msg, want) || strings.Contains(msg, "MEMLOCK") {
				t.Errorf("message %q, want %q and no MEMLOCK", msg, want)
			}
			if !errors.Is(got, syscall.EPERM) {
				t.Errorf("errors.Is(%v, EPERM) = false", got)
			}
		})
	}
}
