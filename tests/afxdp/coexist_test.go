package afxdp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// tcpEcho checks a TCP connection from a's namespace to b's address works:
// the XDP program must pass TCP (and the ARP or ND that precedes it).
func tcpEcho(t *testing.T, a, b netns.Veth, addrB netip.Addr) {
	t.Helper()
	var ln net.Listener
	if err := b.NS.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addrB, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	var c net.Conn
	if err := a.NS.Do(func() (err error) {
		d := net.Dialer{Timeout: giveUp}
		c, err = d.Dial("tcp", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatalf("tcp dial across XDP: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(giveUp))
	msg := []byte("not RoCE, for the kernel")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
		t.Fatalf("tcp echo: %q, %v", got, err)
	}
}

// neighbourKnown reports whether v's namespace resolved ip (ARP or ND went
// through the XDP program to the kernel and back).
func neighbourKnown(t *testing.T, v netns.Veth, ip netip.Addr, mac net.HardwareAddr) bool {
	t.Helper()
	fam := unix.AF_INET
	if ip.Is6() {
		fam = unix.AF_INET6
	}
	ns, err := v.NS.Netlink().NeighList(v.Index, fam)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip && n.HardwareAddr.String() == mac.String() {
			return true
		}
	}
	return false
}

func TestKernelTrafficPasses(t *testing.T) {
	netns.RequireRoot(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			p := netns.NewPair(t, pairConfig(1500, fam))
			a := open(t, p.A, afxdp.Config{})
			b := open(t, p.B, afxdp.Config{})
			tcpEcho(t, p.A, p.B, p.AddrB)
			if !neighbourKnown(t, p.A, p.AddrB, p.B.MAC) {
				t.Errorf("%v not resolved to %v in %s", p.AddrB, p.B.MAC, p.A.NS.Name)
			}
			// RoCE still flows beside it.
			exchange(t, a, b, p.AddrB, []int{64})
			c, _ := b.Program().Counters()
			if c.Passed == 0 {
				t.Errorf("program passed nothing to the kernel: %+v", c)
			}
		})
	}
}

// TestBadICRCDropped sends a RoCE-port datagram with a wrong ICRC from a
// kernel UDP socket: the link must count and drop it.
func TestBadICRCDropped(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(1500, 4))
	b := open(t, p.B, afxdp.Config{})
	var c net.Conn
	if err := p.A.NS.Do(func() (err error) {
		c, err = net.Dial("udp", netip.AddrPortFrom(p.AddrB, bth.RoCEPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	junk := make([]byte, 64)
	junk[0] = 0x04 // RC SEND ONLY, but the ICRC is zeros
	deadline := time.Now().Add(giveUp)
	rx := make([]*link.Packet, 4)
	for b.Stats().RxICRCErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("bad ICRC never counted: %+v", b.Stats())
		}
		c.Write(junk)
		b.Wait(50 * time.Millisecond)
		n, _ := b.Recv(rx)
		if n != 0 {
			t.Fatalf("packet with a bad ICRC delivered")
		}
	}
}

// childEnv, when set, makes the test binary a helper process that opens an
// afxdp link on "netns/ifname" and then waits to be killed.
const childEnv = "UROCE_AFXDP_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(spec string) int {
	nsName, ifname, _ := strings.Cut(spec, "/")
	runtime.LockOSThread()
	h, err := vnetns.GetFromName(nsName)
	if err == nil {
		err = vnetns.Set(h)
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	l, err := afxdp.Open(afxdp.Config{Interface: ifname})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready", l.AttachMode())
	select {} // until SIGKILL
}

func xdpAttached(t *testing.T, v netns.Veth) bool {
	t.Helper()
	l, err := v.NS.Netlink().LinkByIndex(v.Index)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	return x != nil && x.Attached
}

func TestKilledOwnerDetaches(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(1500, 4))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+p.B.NS.Name+"/"+p.B.Name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("child: %q, %v", line, err)
	}
	t.Logf("child %d attached: %s", pid, strings.TrimSpace(line))
	if !xdpAttached(t, p.B) {
		t.Fatal("no XDP program on the interface while the child runs")
	}
	// While attached, RoCE to B goes to the child's socket, not the kernel.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The BPF link dies with its last fd; the kernel releases it
	// asynchronously, so poll (bounded only to fail instead of hanging).
	deadline := time.Now().Add(giveUp)
	for xdpAttached(t, p.B) {
		if time.Now().After(deadline) {
			t.Fatal("XDP program still attached after the owner was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The interface carries traffic normally: TCP, and RoCE-port UDP to a
	// kernel socket.
	tcpEcho(t, p.A, p.B, p.AddrB)
	udpToKernel(t, p.A, p.B, p.AddrB)
}

// udpToKernel checks a datagram to port 4791 reaches a kernel socket in b.
func udpToKernel(t *testing.T, a, b netns.Veth, addrB netip.Addr) {
	t.Helper()
	var srv net.PacketConn
	if err := b.NS.Do(func() (err error) {
		srv, err = net.ListenPacket("udp", netip.AddrPortFrom(addrB, bth.RoCEPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var c net.Conn
	if err := a.NS.Do(func() (err error) {
		c, err = net.Dial("udp", srv.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("UDP 4791 never reached the kernel socket")
		}
		c.Write([]byte("hello " + strconv.Itoa(i)))
		srv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _, err := srv.ReadFrom(buf); err == nil && strings.HasPrefix(string(buf[:n]), "hello") {
			return
		}
	}
}

// TestCloseReleasesEverything checks that Close detaches the program and
// gives back every file descriptor and mapping the link made.
func TestCloseReleasesEverything(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(9000, 4))
	fds0, maps0, vm0 := countFDs(t), countMaps(t), vmSize(t)
	var l *afxdp.Link
	if err := p.B.NS.Do(func() (err error) {
		l, err = afxdp.Open(afxdp.Config{})
		return err
	}); err == nil {
		t.Fatal("Open with no interface succeeded")
	}
	if err := p.B.NS.Do(func() (err error) {
		l, err = afxdp.Open(afxdp.Config{Interface: p.B.Name})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !xdpAttached(t, p.B) {
		t.Fatal("program not attached after Open")
	}
	fds1, maps1, vm1 := countFDs(t), countMaps(t), vmSize(t)
	waitDone := make(chan error)
	go func() { waitDone <- l.Wait(-1) }()
	time.Sleep(10 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waitDone; err != link.ErrClosed {
		t.Errorf("Wait on close returned %v, want link.ErrClosed", err)
	}
	if xdpAttached(t, p.B) {
		t.Error("program still attached after Close")
	}
	fds2, maps2, vm2 := countFDs(t), countMaps(t), vmSize(t)
	t.Logf("fds %d -> %d -> %d, ring mappings %d -> %d -> %d, VmSize %d -> %d -> %d KiB",
		len(fds0), len(fds1), len(fds2), maps0, maps1, maps2, vm0, vm1, vm2)
	// The UMEM is anonymous memory and shows only in VmSize, which the
	// runtime (and the race detector) also grows at will, so it is
	// logged, not asserted; the rings are mappings of the socket.
	// Other tests' goroutines may still open or close descriptors, so
	// compare the link's own: those opened by Open must all be gone. The
	// resolver's netlink subscriptions close from their own goroutines, a
	// moment after Close returns, so look again for a while before failing.
	deadline := time.Now().Add(giveUp)
	for {
		var left []string
		for fd, what := range fds1 {
			// A descriptor closed between countFDs's listing and its
			// readlink reads as "", and one absent now reads as "" too:
			// neither is one of Open's left open.
			if w2, open := fds2[fd]; what != "" && open && fds0[fd] != what && w2 == what {
				left = append(left, fd+" "+what)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("descriptors opened by Open still open after Close: %v", left)
			break
		}
		time.Sleep(10 * time.Millisecond)
		fds2 = countFDs(t)
	}
	if maps2 != maps0 {
		t.Errorf("%d mappings leaked", maps2-maps0)
	}
	if _, err := l.Send(nil); err == nil {
		t.Error("Send after Close succeeded")
	}
	if _, err := l.Recv(make([]*link.Packet, 1)); err != link.ErrClosed {
		t.Errorf("Recv after Close: %v", err)
	}
}

// countFDs returns the process's open descriptors and what they are.
func countFDs(t *testing.T) map[string]string {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]string, len(es))
	for _, e := range es {
		m[e.Name()], _ = os.Readlink("/proc/self/fd/" + e.Name())
	}
	return m
}

// countMaps counts the process's mappings of sockets: AF_XDP rings.
func countMaps(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "socket:[")
}

// vmSize returns the process's address space size in KiB.
func vmSize(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmSize")
	return 0
}
