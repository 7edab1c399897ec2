package main

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"golang.org/x/sys/unix"
)

func runtimeNumCPU() int { return runtime.NumCPU() }

const rawPort = 4790

func rawSocket(v netns.Veth, a netip.Addr) (int, error) {
	var fd int
	err := v.NS.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
		return unix.Bind(fd, &unix.SockaddrInet4{Port: rawPort, Addr: a.As4()})
	})
	return fd, err
}

// rawBench is the baseline: plain kernel UDP with one sendto and one
// busy-polled recvfrom per datagram, payload the same size as a RoCE packet
// of that payload (BTH, ICRC).
func rawBench(va, vb netns.Veth, a, b netip.Addr, size int) (result, error) {
	var r result
	fa, err := rawSocket(va, a)
	if err != nil {
		return r, err
	}
	defer unix.Close(fa)
	fb, err := rawSocket(vb, b)
	if err != nil {
		return r, err
	}
	defer unix.Close(fb)
	n := size + 12 + 4
	toB := &unix.SockaddrInet4{Port: rawPort, Addr: b.As4()}
	toA := &unix.SockaddrInet4{Port: rawPort, Addr: a.As4()}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 65536)
		for !stop.Load() {
			m, _, err := unix.Recvfrom(fb, buf, unix.MSG_DONTWAIT)
			if err != nil {
				continue
			}
			unix.Sendto(fb, buf[:m], 0, toA)
		}
	})
	buf := make([]byte, 65536)
	msg := make([]byte, n)
	rtt := make([]time.Duration, 0, *flagIters)
	warm := 200
	for i := 0; i < *flagIters+warm; i++ {
		start := time.Now()
		unix.Sendto(fa, msg, 0, toB)
		got := false
		for !got && time.Since(start) < time.Second {
			_, _, err := unix.Recvfrom(fa, buf, unix.MSG_DONTWAIT)
			got = err == nil
		}
		if i >= warm && got {
			rtt = append(rtt, time.Since(start))
		}
	}
	stop.Store(true)
	wg.Wait()
	r.min, r.p50, r.p99 = percentiles(rtt)

	// Blast.
	var pkts atomic.Uint64
	var measuring atomic.Bool
	stop.Store(false)
	wg.Go(func() {
		buf := make([]byte, 65536)
		for !stop.Load() {
			if _, _, err := unix.Recvfrom(fb, buf, unix.MSG_DONTWAIT); err == nil && measuring.Load() {
				pkts.Add(1)
			}
		}
	})
	var sent uint64
	blast := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 32 {
				if unix.Sendto(fa, msg, 0, toB) == nil {
					sent++
				}
			}
		}
	}
	blast(*flagDur / 5)
	k0 := readKstats(vb)
	sent = 0
	measuring.Store(true)
	start := time.Now()
	blast(*flagDur)
	el := time.Since(start)
	measuring.Store(false)
	stop.Store(true)
	wg.Wait()
	if *flagVerbose {
		fmt.Printf("    raw-udp %d: received %d\n    %v\n", size, pkts.Load(), readKstats(vb).sub(k0))
	}
	r.pps = float64(pkts.Load()) / el.Seconds()
	r.gbps = r.pps * float64(n) * 8 / 1e9
	r.loss = lossOf(sent, pkts.Load())
	return r, nil
}
