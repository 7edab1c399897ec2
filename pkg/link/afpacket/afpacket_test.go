package afpacket_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afpacket"
	"github.com/uroce/uroce/pkg/link/linktest"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/pkg/netinfo"
	"golang.org/x/sys/unix"
)

func openAF(t testing.TB, v netns.Veth, a netip.Addr, noResv bool) *afpacket.Link {
	t.Helper()
	var l *afpacket.Link
	if err := v.NS.Do(func() (err error) {
		l, err = afpacket.Open(afpacket.Config{Ifname: v.Name, Addr: a, NoPortReservation: noResv})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openRes opens an afpacket link with its own resolver.
func openRes(t *testing.T, v netns.Veth, a netip.Addr, opt netinfo.Options, noResv bool) *afpacket.Link {
	t.Helper()
	h := v.NS.Handle()
	opt.NetNS = &h
	res, err := netinfo.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	var l *afpacket.Link
	if err := v.NS.Do(func() (err error) {
		l, err = afpacket.Open(afpacket.Config{Ifname: v.Name, Addr: a, Resolver: res, NoPortReservation: noResv})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Registered after the resolver's, so it runs first.
	t.Cleanup(func() { l.Close() })
	return l
}

func openUDP(t testing.TB, v netns.Veth, a netip.Addr) *udp.Link {
	t.Helper()
	var l *udp.Link
	if err := v.NS.Do(func() (err error) {
		l, err = udp.Open(udp.Config{Addr: a})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// icmpListener counts ICMP port unreachables arriving in v's namespace
// from peer. Each count ends with a fence: an echo request to peer, whose
// reply comes back behind every error peer sent before it (echo replies
// are not rate-limited, unlike the errors), so the count waits for what is
// on its way instead of sleeping a while and hoping.
func icmpListener(t *testing.T, v netns.Veth, peer netip.Addr) func() int {
	v6 := peer.Is6()
	var fd int
	if err := v.NS.Do(func() (err error) {
		if v6 {
			fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK, unix.IPPROTO_ICMPV6)
		} else {
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK, unix.IPPROTO_ICMP)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	seq := uint16(0)
	return func() int {
		seq++
		// Echo request: type, code, checksum (the kernel fills it for
		// ICMPv6; for IPv4 it is computed here), identifier, sequence.
		req := []byte{8, 0, 0, 0, 0x75, 0x72, byte(seq >> 8), byte(seq)}
		var sa unix.Sockaddr
		if v6 {
			req[0] = 128
			sa = &unix.SockaddrInet6{Addr: peer.As16()}
		} else {
			sa = &unix.SockaddrInet4{Addr: peer.As4()}
			var sum uint32
			for i := 0; i < len(req); i += 2 {
				sum += uint32(req[i])<<8 | uint32(req[i+1])
			}
			sum = sum>>16 + sum&0xffff
			sum += sum >> 16
			req[2], req[3] = byte(^sum>>8), byte(^sum)
		}
		if err := unix.Sendto(fd, req, 0, sa); err != nil {
			t.Fatalf("echo request: %v", err)
		}
		n := 0
		buf := make([]byte, 2048)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			m, _, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN {
				unix.Poll(pfd, -1)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			icmp := buf[:m]
			if !v6 {
				icmp = icmp[min(m, int(buf[0]&0xf)*4):] // raw IPv4 sockets see the IP header
			}
			if len(icmp) < 8 {
				continue
			}
			switch {
			case v6 && icmp[0] == 1 && icmp[1] == 4, !v6 && icmp[0] == 3 && icmp[1] == 3:
				n++
			case (v6 && icmp[0] == 129 || !v6 && icmp[0] == 0) && icmp[4] == 0x75 && icmp[5] == 0x72 &&
				icmp[6] == byte(seq>>8) && icmp[7] == byte(seq):
				return n
			}
		}
	}
}

// TestNoICMP sends RoCE packets from a kernel UDP link to an afpacket link
// and checks that the kernel under the afpacket link answers none of them
// with ICMP port unreachable; with the reservation off it does, which shows
// the check can see them.
func TestNoICMP(t *testing.T) {
	for _, fam := range []int{4, 6} {
		for _, noResv := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/reservation=%v", fam, !noResv), func(t *testing.T) {
				p := netns.NewPair(t, netns.PairConfig{})
				a, b := p.Addr(fam)
				u := openUDP(t, p.A, a)
				af := openAF(t, p.B, b, noResv)
				count := icmpListener(t, p.A, b)
				// Resolve the neighbours first: the kernel drops a burst
				// to a neighbour still being resolved beyond a small queue.
				if err := linktest.Exchange(t, u, af, b, a, 1, 0, 1, 2*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := linktest.Exchange(t, af, u, a, b, 1, 0, 1, 2*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := linktest.Exchange(t, u, af, b, a, 200, 256, 16, 2*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := linktest.Exchange(t, af, u, a, b, 200, 256, 16, 2*time.Second); err != nil {
					t.Fatal(err)
				}
				n := count()
				if !noResv && n != 0 {
					t.Fatalf("%d ICMP port unreachables", n)
				}
				if noResv && n == 0 {
					t.Fatalf("no ICMP seen without the reservation: the check is blind")
				}
				t.Logf("%d ICMP port unreachables", n)
			})
		}
	}
}

func TestCloseReleases(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	a, _ := p.Addr(4)
	l := openAF(t, p.A, a, false)
	done := make(chan error)
	go func() { done <- l.Wait(-1) }()
	time.Sleep(10 * time.Millisecond)
	l.Close()
	if err := <-done; err == nil {
		t.Fatal("Wait returned nil after Close")
	}
	// The port reservation is gone: the port can be bound again.
	l2 := openAF(t, p.A, a, false)
	l2.Close()
}

func BenchmarkVeth(b *testing.B) {
	netns.RequireRoot(b)
	for _, size := range []int{64, 1024, 4096} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			p := netns.NewPair(b, netns.PairConfig{MTU: 9000})
			a, bb := p.Addr(4)
			l1, l2 := openAF(b, p.A, a, false), openAF(b, p.B, bb, false)
			const batch = 32
			pk := make([]*link.Packet, batch)
			rx := make([]*link.Packet, batch)
			// Warm the neighbour cache.
			if err := linktest.Exchange(b, l1, l2, bb, a, 10, 10, 1, time.Second); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size * batch))
			for b.Loop() {
				n := l1.Alloc(pk)
				for _, p := range pk[:n] {
					p.Len = size
					p.Remote = bb
				}
				l1.Send(pk[:n])
				for got := 0; got < n; {
					m, _ := l2.Recv(rx)
					if m == 0 {
						if l2.Wait(100*time.Millisecond) != nil {
							b.Fatal("wait")
						}
						if m, _ = l2.Recv(rx); m == 0 {
							break // lost: veth queue overflow
						}
					}
					got += m
					l2.Release(rx[:m])
				}
			}
		})
	}
}

// TestResolveInBackground: the first Send to a neighbour the kernel does
// not know yet returns at once, dropping the packet with ErrResolving (had
// it waited for ARP, it would have gone out or failed with ErrUnresolved),
// and sending again after the background lookup gets it through. A
// neighbour that never answers turns into ErrUnresolved, remembered, so
// Send keeps returning at once.
func TestResolveInBackground(t *testing.T) {
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("v%d", fam), func(t *testing.T) {
			p := netns.NewPair(t, netns.PairConfig{})
			a, b := p.Addr(fam)
			// Two links on A: one whose resolver waits as long as a
			// loaded machine may need for a real neighbour, one whose
			// resolver gives up on a silent one soon and remembers it.
			af := openRes(t, p.A, a, netinfo.Options{Timeout: time.Minute}, false)
			quick := openRes(t, p.A, a, netinfo.Options{Timeout: 300 * time.Millisecond, FailTTL: time.Hour}, true)
			u := openUDP(t, p.B, b)

			sendOn := func(l *afpacket.Link, dst netip.Addr) (int, error) {
				pk := make([]*link.Packet, 1)
				if l.Alloc(pk) != 1 {
					t.Fatal("no buffer")
				}
				linktest.Fill(pk[0], 7, 32, dst)
				return l.Send(pk)
			}
			send := func(dst netip.Addr) (int, error) { return sendOn(af, dst) }
			n, err := send(b)
			if n != 0 || !errors.Is(err, link.ErrResolving) || errors.Is(err, link.ErrNoRoute) {
				t.Fatalf("first Send to an unresolved neighbour: %d, %v", n, err)
			}
			if s := af.Stats(); s.TxDropped != 1 || s.TxPackets != 0 {
				t.Fatalf("stats after the drop %+v", s)
			}
			// Retransmit until the background lookup has the answer.
			for n, err = send(b); errors.Is(err, link.ErrResolving); n, err = send(b) {
				time.Sleep(time.Millisecond)
			}
			if n != 1 || err != nil {
				t.Fatalf("Send once resolved: %d, %v", n, err)
			}
			rx := make([]*link.Packet, 1)
			for {
				if err := u.Wait(-1); err != nil {
					t.Fatal(err)
				}
				if m, _ := u.Recv(rx); m == 1 {
					break
				}
			}
			if psn, err := linktest.Check(rx[0]); err != nil || psn != 7 {
				t.Fatalf("received PSN %d, %v", psn, err)
			}
			u.Release(rx)

			// Nobody holds this address: resolution fails in the
			// background, and the failure is what Send reports then.
			ghost := b.Next()
			for n, err = sendOn(quick, ghost); errors.Is(err, link.ErrResolving); n, err = sendOn(quick, ghost) {
				time.Sleep(time.Millisecond)
			}
			if n != 0 || !errors.Is(err, netinfo.ErrUnresolved) || !errors.Is(err, link.ErrNoRoute) {
				t.Fatalf("Send to a silent neighbour: %d, %v", n, err)
			}
			if n, err = sendOn(quick, ghost); n != 0 || !errors.Is(err, netinfo.ErrUnresolved) {
				t.Fatalf("failure not remembered: %d, %v", n, err)
			}
		})
	}
}
