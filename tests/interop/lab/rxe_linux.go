package lab

import (
	"context"
	"fmt"
	"io"
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
rdma link add rxe0 type rxe netdev eth0 || exit 1
i=0
while :; do
	g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	case "$g:$st" in
	0000:0000:0000:0000:0000:ffff:*ACTIVE*) exit 0 ;;
	esac
	i=$((i + 1))
	[ $i -gt 200 ] && { echo "rxe0 not active with an IPv4 GID at index 1 (gid1=$g state=$st)" >&2; exit 1; }
	sleep 0.1
done`)
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
