package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Capabilities AF_XDP needs (capability.h): NET_ADMIN to attach the XDP
// program, NET_RAW for the AF_XDP socket, BPF for the program and its
// maps (SYS_ADMIN before Linux 5.8, and still in its place).
const (
	capNetAdmin = 12
	capNetRaw   = 13
	capSysAdmin = 21
	capBPF      = 39
)

// afxdpError explains an EPERM from opening the AF_XDP link (openLocal
// applies it to what the backend returned). The kernel
// answers EPERM to an unprivileged bpf(BPF_MAP_CREATE), and cilium/ebpf
// then suggests MEMLOCK, which on Linux 5.11 and later (memcg accounting)
// is not the cause: the missing capabilities are.
func afxdpError(err error) error {
	return privilegeError(err, effectiveCaps())
}

// privilegeError is afxdpError for the effective capability set caps.
// With every capability present it leaves err as it is: then the cause
// is elsewhere (MEMLOCK on an older kernel, a lockdown).
func privilegeError(err error, caps uint64) error {
	if !errors.Is(err, syscall.EPERM) {
		return err
	}
	has := func(c uint) bool { return caps&(1<<c) != 0 }
	var missing []string
	if !has(capNetAdmin) {
		missing = append(missing, "CAP_NET_ADMIN")
	}
	if !has(capNetRaw) {
		missing = append(missing, "CAP_NET_RAW")
	}
	if !has(capBPF) && !has(capSysAdmin) {
		missing = append(missing, "CAP_BPF")
	}
	if len(missing) == 0 {
		return err
	}
	return &permError{err: err, msg: fmt.Sprintf(
		"--link afxdp needs privileges this process lacks (%s): run it as root, or give it CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (setcap cap_net_admin,cap_net_raw,cap_bpf+ep on the binary); the kernel refused: %v",
		strings.Join(missing, ", "), syscall.EPERM)}
}

// permError says what is missing instead of the refused call's own
// message, and keeps that error for errors.Is.
type permError struct {
	err error
	msg string
}

func (e *permError) Error() string { return e.msg }
func (e *permError) Unwrap() error { return e.err }

// effectiveCaps returns this process's effective capabilities (CapEff in
// /proc/self/status), or none if they cannot be read.
func effectiveCaps() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps
		}
	}
	return 0
}
