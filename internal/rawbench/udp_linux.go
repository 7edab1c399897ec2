package rawbench

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"golang.org/x/sys/unix"
)

// udpPort is the floor's port: beside RoCE's 4791, so an XDP program left
// on the interface steers none of it.
const udpPort = 4790

func udpSocket(v netns.Veth, a netip.Addr) (int, error) {
	var fd int
	err := v.NS.Do(func() (err error) {
		// Non-blocking, read with read(2): recvfrom's source address
		// would be an allocation a datagram, and the floor's garbage
		// would bring the collector into the measurements.
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: udpPort, Addr: a.As4()}); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("udp floor socket in %s: %w", v.NS.Name, err)
	}
	return fd, nil
}

// UDP measures the kernel UDP floor from va (address a) to vb (address
// b): one sendto and one busy-polled recvfrom per datagram, each datagram
// as large as a RoCE packet with size payload bytes (BTH, ICRC). B echoes
// the ping-pong and counts the blast. IPv4 only.
func UDP(cfg Config, va, vb netns.Veth, a, b netip.Addr, size int) (Result, error) {
	var r Result
	fa, err := udpSocket(va, a)
	if err != nil {
		return r, err
	}
	defer unix.Close(fa)
	fb, err := udpSocket(vb, b)
	if err != nil {
		return r, err
	}
	defer unix.Close(fb)
	n := wireLen(size)
	toB := &unix.SockaddrInet4{Port: udpPort, Addr: b.As4()}
	toA := &unix.SockaddrInet4{Port: udpPort, Addr: a.As4()}
	var stop atomic.Bool
	var wg sync.WaitGroup
	msg := make([]byte, n)

	if cfg.Iters > 0 {
		wg.Go(func() {
			buf := make([]byte, 65536)
			for !stop.Load() {
				m, err := unix.Read(fb, buf)
				if err != nil {
					continue
				}
				unix.Sendto(fb, buf[:m], 0, toA)
			}
		})
		buf := make([]byte, 65536)
		// pingPong fills rtt with round trips; a lost one (a second
		// without an answer) is left out.
		pingPong := func(rtt []time.Duration) []time.Duration {
			n := 0
			for range rtt {
				start := time.Now()
				unix.Sendto(fa, msg, 0, toB)
				got := false
				for !got && time.Since(start) < time.Second {
					_, err := unix.Read(fa, buf)
					got = err == nil
				}
				if got {
					rtt[n] = time.Since(start)
					n++
				}
			}
			return rtt[:n]
		}
		cfg.warmUp(func(rtt []time.Duration) error { pingPong(rtt); return nil })
		rtt := pingPong(make([]time.Duration, cfg.Iters))
		stop.Store(true)
		wg.Wait()
		if len(rtt) == 0 {
			return r, fmt.Errorf("udp floor: %w", ErrNoReply)
		}
		r.Min, r.P50, r.P99 = Percentiles(rtt)
	}
	if cfg.Blast <= 0 {
		return r, nil
	}

	var pkts atomic.Uint64
	var measuring atomic.Bool
	stop.Store(false)
	wg.Go(func() {
		buf := make([]byte, 65536)
		for !stop.Load() {
			if _, err := unix.Read(fb, buf); err == nil && measuring.Load() {
				pkts.Add(1)
			}
		}
	})
	// A full send buffer refuses a datagram (EAGAIN) rather than
	// blocking; only those sent count.
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
	blast(cfg.Blast / 5)
	k0 := ReadKStats(vb)
	sent = 0
	measuring.Store(true)
	start := time.Now()
	blast(cfg.Blast)
	el := time.Since(start)
	measuring.Store(false)
	stop.Store(true)
	wg.Wait()
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "    raw-udp %d: received %d\n    %v\n", size, pkts.Load(), ReadKStats(vb).Sub(k0))
	}
	r.PPS = float64(pkts.Load()) / el.Seconds()
	r.Gbps = r.PPS * float64(n) * 8 / 1e9
	r.Loss = Loss(sent, pkts.Load())
	return r, nil
}
