package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/vishvananda/netlink"
)

// Addresses inside every lab: they exist only in the lab's namespaces.
var (
	// PeerAddr is the address of the uroce side of the lab (Lab.Peer).
	PeerAddr = netip.MustParsePrefix("10.77.0.1/24")
	// FirstGuestHost is the last byte of the first guest's address and
	// MAC; later guests count up from it (10.77.0.11, .12, ...).
	FirstGuestHost = 11
)

// Config says how to build a Lab.
type Config struct {
	// MTU of the bridge, the taps, the veth pair and the guests' eth0;
	// 0 means 1500 (rxe0 active_mtu 1024). 9000 gives active_mtu 4096.
	MTU int
	// Flavour is the Debian release of the guests; empty means
	// DefaultFlavour ($UROCE_LAB_FLAVOUR, else Bookworm).
	Flavour Flavour
}

// Lab is a bridge in its own namespace with room for guests and a veth
// into a second namespace, Peer, where the stack under test runs.
type Lab struct {
	t testing.TB
	// NS holds the bridge, the guests' taps and one end of the veth.
	NS *netns.NS
	// Bridge is the bridge's name in NS.
	Bridge string
	// Peer is the namespace of the stack under test; PeerLink is its end
	// of the veth, addressed PeerAddr.
	Peer     *netns.NS
	PeerLink netns.Veth
	MTU      int
	// Image is the guests' image: its Flavour and versions.
	Image *Image

	dir    string // artifacts: consoles, shares, captures
	guests int
}

// New builds a lab for t: the image (see BuildImage), both namespaces, the
// bridge and the veth pair. Everything is removed by t.Cleanup. It skips
// the test when not root or with -short, and fails it when the lab cannot
// be built.
func New(t testing.TB, cfg Config) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping the rxe lab: needs root for namespaces, taps and the guests' build")
	}
	if testing.Short() {
		t.Skip("skipping the rxe lab (QEMU guests) in -short mode")
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.Flavour == "" {
		f, err := DefaultFlavour()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Flavour = f
	}
	img, err := BuildImage(cfg.Flavour)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab: %s (%s)", img.Versions(), img.Dir)
	l := &Lab{t: t, Image: img, MTU: cfg.MTU, dir: artifactDir(t)}
	l.NS = netns.New(t)
	l.Peer = netns.New(t)
	l.Bridge = netns.UniqueName(t, "urbr")
	nl := l.NS.Netlink()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: l.Bridge, MTU: cfg.MTU}}
	if err := nl.LinkAdd(br); err != nil {
		t.Fatalf("lab: bridge %s: %v", l.Bridge, err)
	}
	vl, vp := netns.NewVeth(t, l.NS, l.Peer)
	vl.SetMTU(t, cfg.MTU)
	vp.SetMTU(t, cfg.MTU)
	if err := l.enslave(vl.Name); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetUp(br); err != nil {
		t.Fatalf("lab: bridge %s up: %v", l.Bridge, err)
	}
	vp.AddAddr(t, PeerAddr)
	l.PeerLink = vp
	return l
}

// enslave puts the interface on the bridge and brings it up.
func (l *Lab) enslave(name string) error {
	nl := l.NS.Netlink()
	link, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	br, err := nl.LinkByName(l.Bridge)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", l.Bridge, err)
	}
	if err := nl.LinkSetMTU(link, l.MTU); err != nil {
		return fmt.Errorf("lab: mtu of %s: %w", name, err)
	}
	if err := nl.LinkSetMaster(link, br); err != nil {
		return fmt.Errorf("lab: %s onto %s: %w", name, l.Bridge, err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("lab: %s up: %w", name, err)
	}
	return nil
}

// GuestConfig says how to start a guest; zero fields take the defaults.
type GuestConfig struct {
	Name string           // host name and log name; default g1, g2, ...
	Addr netip.Prefix     // eth0's address; default 10.77.0.(10+n)/24
	MAC  net.HardwareAddr // default 52:54:00:77:00:(10+n)
	// ZeroCopyNIC gives eth0 what virtio-net's AF_XDP zero-copy needs
	// (Linux 6.11 and later; flavour TrixieBackports): a modern-only
	// device (queue reset, VIRTIO_F_RING_RESET) behind the platform's
	// DMA API (iommu_platform, VIRTIO_F_ACCESS_PLATFORM, so buffers can be
	// premapped) and two queue pairs on a multi-queue tap, one for the
	// stack and one that XDP transmits take.
	ZeroCopyNIC bool
}

// GuestAddr returns the default address of the n-th guest (from 1).
func GuestAddr(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, 0, byte(FirstGuestHost - 1 + n)}), 24)
}

// Boot starts one guest per config, all at once, and waits until each has
// rxe0 ready. It fails the test if any does not come up within BootTimeout.
//
// A guest whose kernel dies while booting (QEMU exits: TCG on a loaded
// host has made early timer checks fail) is started once more, and the
// first console is logged; a guest whose init reports a failure is not.
func (l *Lab) Boot(cfgs ...GuestConfig) []*Guest {
	l.t.Helper()
	gs := make([]*Guest, len(cfgs))
	start := time.Now()
	for i, c := range cfgs {
		g, err := l.Start(c)
		if err != nil {
			l.t.Fatal(err)
		}
		gs[i] = g
	}
	ctx, cancel := context.WithTimeout(context.Background(), BootTimeout)
	defer cancel()
	for i, g := range gs {
		err := g.WaitReady(ctx)
		if errors.Is(err, ErrGuestExited) {
			l.t.Logf("lab: %s died while booting; starting it once more. %v", g.Name, err)
			if g, err = l.restart(g); err == nil {
				gs[i] = g
				err = g.WaitReady(ctx)
			}
		}
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Logf("lab: %s (%s) ready %.1fs after start: %s", g.Name, g.Addr, g.BootTime.Seconds(), g.ReadyLine)
	}
	l.t.Logf("lab: %d guest(s) ready in %.1fs", len(gs), time.Since(start).Seconds())
	return gs
}

// PeerCommand returns a command that runs name in the Peer namespace
// (through `ip netns exec`), e.g. the uroce side of an interop test.
func (l *Lab) PeerCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.Peer.Name, name}, args...)...)
}

// NSCommand is PeerCommand for the lab namespace (the bridge's).
func (l *Lab) NSCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS.Name, name}, args...)...)
}

// Dir is where the lab keeps consoles, shares and captures for this test.
func (l *Lab) Dir() string { return l.dir }

// artifactDir is $UROCE_LAB_ARTIFACTS/<test name> when that is set, so that
// consoles and captures outlive the test; otherwise a t.TempDir.
func artifactDir(t testing.TB) string {
	base := os.Getenv("UROCE_LAB_ARTIFACTS")
	if base == "" {
		return t.TempDir()
	}
	d := filepath.Join(base, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("lab: artifacts: %v", err)
	}
	return d
}
