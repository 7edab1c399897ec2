package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
)

// udpPingPong measures what uroce's latency stands on: a plain kernel UDP
// ping-pong of size-byte datagrams between two sockets on srv and cli, one
// echoing, reported with perftest's arithmetic (half the round trip).
// With spin, both ends busy-poll non-blocking reads, as uroce-perf does;
// without, they block in the kernel as ordinary Go code does.
func udpPingPong(srv, cli netip.Addr, size, iters int, spin bool, timeout time.Duration) (perftest.LatencyReport, error) {
	sc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(srv, 0)))
	if err != nil {
		return perftest.LatencyReport{}, fmt.Errorf("udp baseline: %w", err)
	}
	defer sc.Close()
	cc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cli, 0)))
	if err != nil {
		return perftest.LatencyReport{}, fmt.Errorf("udp baseline: %w", err)
	}
	defer cc.Close()
	deadline := time.Now().Add(timeout)
	sc.SetDeadline(deadline)
	cc.SetDeadline(deadline)
	echoErr := make(chan error, 1)
	go func() {
		buf := make([]byte, size)
		for range iters {
			_, from, err := recv(sc, buf, spin)
			if err != nil {
				echoErr <- err
				return
			}
			if _, err := sc.WriteToUDPAddrPort(buf, from); err != nil {
				echoErr <- err
				return
			}
		}
		echoErr <- nil
	}()
	to := sc.LocalAddr().(*net.UDPAddr).AddrPort()
	buf := make([]byte, size)
	posted := make([]time.Duration, iters)
	start := time.Now()
	for i := range posted {
		posted[i] = time.Since(start)
		if _, err := cc.WriteToUDPAddrPort(buf, to); err != nil {
			return perftest.LatencyReport{}, fmt.Errorf("udp baseline: %w", err)
		}
		if _, _, err := recv(cc, buf, spin); err != nil {
			return perftest.LatencyReport{}, fmt.Errorf("udp baseline: %w", err)
		}
	}
	if err := <-echoErr; err != nil {
		return perftest.LatencyReport{}, fmt.Errorf("udp baseline echo: %w", err)
	}
	return perftest.Latency(size, posted, true)
}

// recv reads one datagram, blocking or busy-polling.
func recv(c *net.UDPConn, buf []byte, spin bool) (int, netip.AddrPort, error) {
	if !spin {
		return c.ReadFromUDPAddrPort(buf)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	deadline := time.Now().Add(time.Minute)
	for spins := 1; ; spins++ {
		var n int
		var from syscall.Sockaddr
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, from, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true
		}); err != nil {
			return 0, netip.AddrPort{}, err
		}
		if rerr == nil {
			sa, ok := from.(*syscall.SockaddrInet4)
			if !ok {
				return 0, netip.AddrPort{}, errors.New("udp baseline: not IPv4")
			}
			return n, netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)), nil
		}
		if !errors.Is(rerr, syscall.EAGAIN) {
			return 0, netip.AddrPort{}, rerr
		}
		if spins&63 == 0 {
			runtime.Gosched()
			if time.Now().After(deadline) {
				return 0, netip.AddrPort{}, fmt.Errorf("udp baseline: %w", ErrStalled)
			}
		}
	}
}
