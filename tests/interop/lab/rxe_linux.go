package lab

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
)

// Put copies the host file src into the guest's 9p share as name and
// returns its path in the guest (/lab/name), e.g. a static uroce-perf for
// a benchmark that runs uroce on both guests. The file keeps src's mode.
func (g *Guest) Put(src, name string) (string, error) {
	if name != filepath.Base(name) {
		return "", fmt.Errorf("lab: %s: put %q: a file name, not a path", g.Name, name)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("lab: %s: put: %w", g.Name, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", fmt.Errorf("lab: %s: put: %w", g.Name, err)
	}
	dst := filepath.Join(g.share, name)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return "", fmt.Errorf("lab: %s: put: %w", g.Name, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", fmt.Errorf("lab: %s: put %s: %w", g.Name, name, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("lab: %s: put %s: %w", g.Name, name, err)
	}
	return "/lab/" + name, nil
}

// RemoveRxe deletes rxe0 and unloads rdma_rxe, which frees UDP port 4791
// for another RoCEv2 stack on the guest's eth0: Linux 6.1's rxe opens its
// tunnel socket on 4791 when the module loads, not per device
// (drivers/infiniband/sw/rxe/rxe_net.c, rxe_net_init). AddRxe undoes it.
func (g *Guest) RemoveRxe(ctx context.Context) error {
	return g.runOK(ctx, "remove rxe0", `rdma link delete rxe0 && rmmod rdma_rxe`)
}

// AddRxe loads rdma_rxe again and adds rxe0 on eth0, and waits as the
// guest's /init does until rxe0 is active with its IPv4-mapped GID at
// index 1.
func (g *Guest) AddRxe(ctx context.Context) error {
	return g.runOK(ctx, "add rxe0", `insmod "/lib/modules/$(uname -r)/rdma_rxe.ko" &&
`+linkRxe("rxe0", "eth0"))
}

// AddVLAN adds an 802.1Q sub-interface of eth0 with VLAN id and address
// addr, named eth0.ID (the guest's /init loads 8021q).
func (g *Guest) AddVLAN(ctx context.Context, id int, addr netip.Prefix) error {
	dev := fmt.Sprintf("eth0.%d", id)
	return g.runOK(ctx, "add "+dev, fmt.Sprintf("ip link add link eth0 name %s type vlan id %d && ip addr add %s dev %s && ip link set %s up",
		dev, id, addr, dev, dev))
}

// GIDIndex waits until rxe device dev's port 1 has addr's IPv4-mapped GID
// and returns its index. rxe runs only on a real device, but its GID
// table takes the addresses of the VLAN devices above it too, and traffic
// from such a GID leaves tagged through that VLAN device (the kernel's
// RoCE GID cache, roce_gid_mgmt.c).
func (g *Guest) GIDIndex(ctx context.Context, dev string, addr netip.Addr) (int, error) {
	b := addr.As16()
	want := fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[12], b[13], b[14], b[15])
	r, err := g.Run(ctx, fmt.Sprintf(`i=0
while [ $i -lt 100 ]; do
	for f in /sys/class/infiniband/%s/ports/1/gids/*; do
		[ "$(cat $f 2>/dev/null)" = %s ] && { basename $f; exit 0; }
	done
	i=$((i + 1))
	sleep 0.1
done
exit 1`, dev, want))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("lab: %s: no GID %s on %s: %w", g.Name, want, dev, err)
	}
	var idx int
	if _, err := fmt.Sscan(r.Stdout, &idx); err != nil {
		return 0, fmt.Errorf("lab: %s: GID index %q: %w", g.Name, r.Stdout, err)
	}
	return idx, nil
}

// linkRxe is the shell that adds rxe device name on netdev and waits for
// it as the guest's /init waits for rxe0.
func linkRxe(name, netdev string) string {
	return fmt.Sprintf(`rdma link add %[1]s type rxe netdev %[2]s || exit 1
i=0
while :; do
	g=$(cat /sys/class/infiniband/%[1]s/ports/1/gids/1 2>/dev/null)
	st=$(cat /sys/class/infiniband/%[1]s/ports/1/state 2>/dev/null)
	case "$g:$st" in
	0000:0000:0000:0000:0000:ffff:*ACTIVE*) exit 0 ;;
	esac
	i=$((i + 1))
	[ $i -gt 200 ] && { echo "%[1]s not active with an IPv4 GID at index 1 (gid1=$g state=$st)" >&2; exit 1; }
	sleep 0.1
done`, name, netdev)
}

// runOK runs cmd in the guest and turns a lab error or a non-zero exit
// status into an error about what.
func (g *Guest) runOK(ctx context.Context, what, cmd string) error {
	r, err := g.Run(ctx, cmd)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("lab: %s: %s: %w", g.Name, what, err)
	}
	return nil
}
