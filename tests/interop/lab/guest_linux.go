package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/uroce/uroce/internal/netns"
	"golang.org/x/sys/unix"
)

// Timeouts that detect a stuck guest; none of them is a performance claim.
const (
	// BootTimeout bounds QEMU start to "rxe0 ready". TCG boots take
	// 5-15 s on an idle machine, several times that on a busy one.
	BootTimeout = 3 * time.Minute
	// ShutdownTimeout bounds a requested power-off before QEMU is killed.
	ShutdownTimeout = 20 * time.Second
)

// QEMU is the emulator binary (from Debian's qemu-system-x86).
var QEMU = "qemu-system-x86_64"

// Errors of guests and jobs.
var (
	ErrGuestExited = errors.New("guest exited")
	ErrGuestFailed = errors.New("guest init failed")
)

// Guest is one booted rxe peer.
type Guest struct {
	Name string
	Addr net.IP // eth0's IPv4 address
	MAC  net.HardwareAddr
	// BootTime is from QEMU's start to "rxe0 ready"; ReadyLine that line.
	BootTime  time.Duration
	ReadyLine string

	cfg     GuestConfig
	lab     *Lab
	cmd     *exec.Cmd
	share   string // host side of the 9p share
	console *consoleWriter
	started time.Time
	exited  chan struct{} // closed when QEMU has exited
	waitErr error         // QEMU's exit, valid after exited
	jobs    atomic.Uint32
}

// Start starts QEMU for one guest and returns at once; WaitReady waits
// for its rxe0. The guest is powered off (and QEMU killed by its PID if
// it does not go) by t.Cleanup.
func (l *Lab) Start(cfg GuestConfig) (*Guest, error) {
	l.guests++
	n := l.guests
	if cfg.Name == "" {
		cfg.Name = "g" + strconv.Itoa(n)
	}
	if !cfg.Addr.IsValid() {
		cfg.Addr = GuestAddr(n)
	}
	if cfg.MAC == nil {
		// As in the reference captures: 52:54:00:77:00:0b for 10.77.0.11.
		cfg.MAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, cfg.Addr.Addr().As4()[3]}
	}
	return l.start(cfg)
}

// start starts a guest whose config is complete.
func (l *Lab) start(cfg GuestConfig) (*Guest, error) {
	g := &Guest{Name: cfg.Name, Addr: cfg.Addr.Addr().AsSlice(), MAC: cfg.MAC, cfg: cfg, lab: l, exited: make(chan struct{})}

	dir := filepath.Join(l.dir, cfg.Name)
	os.RemoveAll(dir) // a kept artifact directory from an earlier run
	g.share = filepath.Join(dir, "share")
	for _, d := range []string{"jobs", "run", "out", "kill"} {
		if err := os.MkdirAll(filepath.Join(g.share, d), 0o755); err != nil {
			return nil, fmt.Errorf("lab: %s share: %w", cfg.Name, err)
		}
	}
	queues := 1
	if cfg.ZeroCopyNIC {
		queues = zeroCopyQueues
	}
	taps, err := l.newTap(cfg.Name, queues)
	if err != nil {
		return nil, err
	}
	defer func() { // QEMU holds its own copies from here on
		for _, f := range taps {
			f.Close()
		}
	}()
	console, err := newConsole(filepath.Join(dir, "console.log"))
	if err != nil {
		return nil, err
	}
	g.console = console

	// no_timer_check: on a loaded host a TCG guest can miss the ticks
	// the kernel's IO-APIC timer check counts, and it panics with
	// "IO-APIC + timer doesn't work!" (arch/x86/kernel/apic/io_apic.c).
	appendLine := fmt.Sprintf("console=ttyS0 panic=-1 loglevel=4 no_timer_check uroce.ip=%s uroce.mtu=%d uroce.name=%s",
		cfg.Addr, l.MTU, cfg.Name)
	args := []string{
		"-name", cfg.Name,
		"-accel", "tcg,thread=multi", "-cpu", "max", "-m", "512", "-smp", "1",
		// No default devices (floppy, CD-ROM, VGA, monitor): less for
		// the firmware to probe, and the serial port is the console.
		"-nodefaults", "-nographic", "-serial", "stdio", "-no-reboot",
		"-kernel", l.Image.Kernel, "-initrd", l.Image.Initrd, "-append", appendLine,
		"-netdev", tapNetdev(len(taps)),
		"-device", virtioNet(cfg),
		"-virtfs", "local,path=" + g.share + ",mount_tag=lab,security_model=none,id=lab",
	}
	g.cmd = exec.Command(QEMU, args...)
	g.cmd.Stdout, g.cmd.Stderr = console, console
	g.cmd.ExtraFiles = taps
	// QEMU goes when the test process dies, however it dies; in its own
	// process group, a ^C at the terminal reaches only the test, whose
	// cleanup powers the guest off.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	g.started = time.Now()
	if err := startOnSpawner(g.cmd); err != nil {
		console.Close()
		return nil, fmt.Errorf("lab: start %s: %w", QEMU, err)
	}
	go func() {
		g.waitErr = g.cmd.Wait()
		console.Close()
		close(g.exited)
	}()
	l.t.Cleanup(g.shutdown)
	return g, nil
}

// Pdeathsig fires when the thread that forked the child exits, not the
// process, and Go ends threads whose goroutine exits while locked to them
// (as netns does with namespace-switched threads). So QEMU is forked from
// one locked thread that lives as long as the process.
var (
	spawnOnce sync.Once
	spawnReqs chan *exec.Cmd
	spawnErrs chan error
)

func startOnSpawner(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs, spawnErrs = make(chan *exec.Cmd), make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread never ends
			for c := range spawnReqs {
				spawnErrs <- c.Start()
			}
		}()
	})
	spawnReqs <- cmd
	return <-spawnErrs
}

// zeroCopyQueues is the queue pairs of a ZeroCopyNIC.
const zeroCopyQueues = 2

// tapNetdev is QEMU's -netdev for n tap files, which start at fd 3
// (ExtraFiles).
func tapNetdev(n int) string {
	fds := make([]string, n)
	for i := range fds {
		fds[i] = strconv.Itoa(3 + i)
	}
	if n == 1 {
		return "tap,id=n0,fd=3"
	}
	return "tap,id=n0,fds=" + strings.Join(fds, ":")
}

// virtioNet is QEMU's -device for the guest's eth0. romfile= skips iPXE's
// option ROM: the kernel is booted directly.
func virtioNet(cfg GuestConfig) string {
	d := "virtio-net-pci,netdev=n0,romfile=,mac=" + cfg.MAC.String()
	if cfg.ZeroCopyNIC {
		// One MSI-X vector per queue, one for the control queue and one
		// for configuration changes, as QEMU's docs for mq give it.
		d += fmt.Sprintf(",disable-legacy=on,iommu_platform=on,mq=on,vectors=%d", 2*zeroCopyQueues+2)
	}
	return d
}

// newTap creates a tap with the given number of queues in the lab
// namespace, puts it on the bridge and returns one file per queue for
// QEMU. The tap lives as long as a copy of a file is open, so it goes away
// with QEMU.
func (l *Lab) newTap(guest string, queues int) ([]*os.File, error) {
	name := netns.UniqueName(l.t, "urt")
	var fs []*os.File
	closeAll := func() {
		for _, f := range fs {
			f.Close()
		}
	}
	err := l.NS.Do(func() error {
		for range queues {
			// The tap belongs to the namespace /dev/net/tun was opened in.
			fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open /dev/net/tun: %w", err)
			}
			var req struct {
				name  [unix.IFNAMSIZ]byte
				flags uint16
				_     [22]byte
			}
			copy(req.name[:], name)
			// vnet_hdr lets QEMU hand checksum offload through to the tap.
			req.flags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR
			if queues > 1 {
				// Each open attaches one more queue to the same tap.
				req.flags |= unix.IFF_MULTI_QUEUE
			}
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
				unix.Close(fd)
				return fmt.Errorf("TUNSETIFF %s: %w", name, e)
			}
			fs = append(fs, os.NewFile(uintptr(fd), "/dev/net/tun:"+name))
		}
		return nil
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("lab: tap for %s: %w", guest, err)
	}
	if err := l.enslave(name); err != nil {
		closeAll()
		return nil, err
	}
	return fs, nil
}

// restart starts a guest again after g's QEMU died while booting,
// keeping g's files beside the new ones for a look afterwards.
func (l *Lab) restart(g *Guest) (*Guest, error) {
	dir := filepath.Join(l.dir, g.Name)
	os.RemoveAll(dir + ".died")
	if err := os.Rename(dir, dir+".died"); err != nil {
		return nil, fmt.Errorf("lab: keep %s's files: %w", g.Name, err)
	}
	return l.start(g.cfg)
}

// WaitReady waits until the guest's init reports rxe0 ready.
func (g *Guest) WaitReady(ctx context.Context) error {
	select {
	case line := <-g.console.ready:
		g.BootTime = time.Since(g.started)
		g.ReadyLine = line
		return nil
	case line := <-g.console.failed:
		return fmt.Errorf("lab: %s: %w: %s\n%s", g.Name, ErrGuestFailed, line, g.ConsoleTail(30))
	case <-g.exited:
		return fmt.Errorf("lab: %s: %w before rxe0 was ready (%v)\n%s", g.Name, ErrGuestExited, g.waitErr, g.ConsoleTail(30))
	case <-ctx.Done():
		return fmt.Errorf("lab: %s: waiting for rxe0: %w\n%s", g.Name, ctx.Err(), g.ConsoleTail(30))
	}
}

// ConsoleTail returns the last n lines of the guest's serial console.
func (g *Guest) ConsoleTail(n int) string {
	return tail(g.console.String(), n)
}

// shutdown asks the guest to power off, gives it ShutdownTimeout, then
// kills QEMU by its PID. On a failed test it logs the console's tail.
func (g *Guest) shutdown() {
	t := g.lab.t
	if t.Failed() {
		t.Logf("lab: %s console (last lines):\n%s", g.Name, g.ConsoleTail(40))
	}
	select {
	case <-g.exited:
		return
	default:
	}
	os.WriteFile(filepath.Join(g.share, "poweroff"), nil, 0o644)
	select {
	case <-g.exited:
		return
	case <-time.After(ShutdownTimeout):
	}
	t.Logf("lab: %s did not power off; killing QEMU (pid %d)", g.Name, g.cmd.Process.Pid)
	g.cmd.Process.Kill()
	<-g.exited
}

// consoleWriter keeps QEMU's output in a log file and a buffer and tells
// WaitReady about the init's status lines.
type consoleWriter struct {
	mu      sync.Mutex
	f       *os.File
	buf     bytes.Buffer
	partial []byte
	ready   chan string
	failed  chan string
}

func newConsole(path string) (*consoleWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("lab: console log: %w", err)
	}
	return &consoleWriter{f: f, ready: make(chan string, 1), failed: make(chan string, 1)}, nil
}

func (c *consoleWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.f.Write(p)
	c.buf.Write(p)
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(c.partial[:i]), "\r")
		c.partial = c.partial[i+1:]
		if j := strings.Index(line, "uroce-lab: rxe0 ready"); j >= 0 {
			select {
			case c.ready <- line[j:]:
			default:
			}
		} else if j := strings.Index(line, "uroce-lab: FAILED"); j >= 0 {
			select {
			case c.failed <- line[j:]:
			default:
			}
		}
	}
	return len(p), nil
}

func (c *consoleWriter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *consoleWriter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Close()
}
