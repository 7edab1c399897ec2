package interop_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// vlanID is the VLAN the VLAN cells tag their RoCE traffic with.
const vlanID = 100

// TestVLANRxe runs uroce over an 802.1Q sub-interface, which the host's
// kernel cannot have (no 8021q): uroce-perf in one guest on eth0.100,
// perftest in the other on rxe0's GID of its eth0.100 address, write_lat both
// ways on the udp backend and with uroce as the client on afpacket and
// afxdp, whose frames the VLAN device tags in the kernel. The capture on
// the bridge must show every RoCE packet tagged with the VLAN and
// verifying.
func TestVLANRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildStatic(t, "github.com/uroce/uroce/cmd/uroce-perf")
	gs := l.Boot(lab.GuestConfig{}, lab.GuestConfig{})
	ug, rg := gs[0], gs[1] // uroce's guest, rxe's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installUrocePerf(t, ctx, ug, bin)
	vaddr := func(g int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.78.0.%d/24", 10+g)) }
	if err := ug.AddVLAN(ctx, vlanID, vaddr(1)); err != nil {
		t.Fatal(err)
	}
	if err := rg.AddVLAN(ctx, vlanID, vaddr(2)); err != nil {
		t.Fatal(err)
	}
	// rxe refuses a VLAN device ("rxe creation allowed on top of a real
	// device only"); rxe0's GID table has the VLAN's address instead.
	gidx, err := rg.GIDIndex(ctx, "rxe0", vaddr(2).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: rxe0's GID %d is %v on eth0.%d", rg.Name, gidx, vaddr(2).Addr(), vlanID)
	const size, iters = 64, 100
	perftest := fmt.Sprintf("ib_write_lat -d rxe0 -x %d -F -n %d -s %d", gidx, iters, size)
	uroce := func(link string) string {
		return fmt.Sprintf("/tmp/uroce-perf write_lat --link %s -d eth0.%d -F -n %d -s %d --timeout 1m", link, vlanID, iters, size)
	}
	for _, c := range []struct {
		link        string
		uroceClient bool
	}{{"udp", true}, {"udp", false}, {"afpacket", true}, {"afxdp", true}} {
		name := c.link + "/uroce-server"
		if c.uroceClient {
			name = c.link + "/uroce-client"
		}
		t.Run(name, func(t *testing.T) {
			capture := l.Capture("vlan-" + c.link)
			defer func() {
				if t.Failed() { // what reached the bridge, for the failure
					recs, err := capture.Stop()
					t.Logf("capture: %v (%v)", lab.VerifyRoCE(recs), err)
					logFrames(t, recs, 4)
				}
			}()
			var server, client lab.Result
			if c.uroceClient {
				server, client = runPairCmds(t, rg, ug, perftest, uroce(c.link))
			} else {
				server, client = runPairCmds(t, ug, rg, uroce(c.link), perftest)
			}
			recs, err := capture.Stop()
			if err != nil {
				t.Error(err)
			}
			checkReport(t, server, size, iters)
			checkReport(t, client, size, iters)
			t.Logf("client:\n%s", client.Stdout)
			stats := lab.VerifyRoCE(recs)
			t.Logf("capture: %v", stats)
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			if stats.Packets < 2*iters {
				t.Errorf("capture: %d RoCE packets, want at least %d", stats.Packets, 2*iters)
			}
			// Every RoCE packet on the bridge carries the VLAN's tag
			// and the VLAN's addresses.
			untagged := 0
			for _, r := range recs {
				var f bth.Frame
				if f.Decode(r.Data) != nil {
					continue
				}
				v := f.VLAN()
				src, dst := f.IPv4().Src(), f.IPv4().Dst()
				if v == nil || v.ID() != vlanID || !vaddr(1).Contains(src) || !vaddr(1).Contains(dst) {
					untagged++
				}
			}
			if untagged != 0 {
				t.Errorf("capture: %d of %d RoCE packets not on VLAN %d between its addresses", untagged, stats.Packets, vlanID)
			}
		})
	}
}

// installUrocePerf puts uroce-perf at /tmp/uroce-perf in g, from the
// guest's tmpfs so that no 9p read runs beside it, and unloads rdma_rxe
// there, which holds the UDP port uroce takes (4791) while loaded.
func installUrocePerf(t *testing.T, ctx context.Context, g *lab.Guest, bin string) {
	t.Helper()
	p, err := g.Put(bin, "uroce-perf")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := g.Run(ctx, "cp "+p+" /tmp/uroce-perf"); err != nil || r.Err() != nil {
		t.Fatalf("%s: copy uroce-perf: %v %v", g.Name, err, r.Err())
	}
	if err := g.RemoveRxe(ctx); err != nil {
		t.Fatal(err)
	}
}

// logFrames logs the link headers of the first n RoCE frames of recs.
func logFrames(t *testing.T, recs []pcapfile.Record, n int) {
	for i, r := range recs {
		var f bth.Frame
		if f.Decode(r.Data) != nil {
			continue
		}
		if n--; n < 0 {
			return
		}
		vid := -1
		if v := f.VLAN(); v != nil {
			vid = int(v.ID())
		}
		e, ip := f.Ethernet(), f.IPv4()
		t.Logf("frame %d: %x > %x VLAN %d, %v > %v TTL %d ID %#x, UDP %d > %d checksum %#04x, %v PSN %d",
			i+1, e.Src(), e.Dst(), vid, ip.Src(), ip.Dst(), ip.TTL(), ip.ID(), f.UDP().SrcPort(), f.UDP().DstPort(), f.UDP().Checksum(), f.Opcode(), f.BTH().PSN())
	}
}
