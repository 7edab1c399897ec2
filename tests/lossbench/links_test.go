package lossbench_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/uroce/uroce/internal/netns"
)

const (
	linkMTU = 9000
	pathMTU = 4096
	// bottleneckMbit is the dumbbell's tbf rate: far below what one
	// flow reaches over the bare veth pair on the 2-core development
	// machine (400-730 MB/s of goodput, 2026-12-02), so that the
	// router's queue, not the hosts, sets the pace.
	bottleneckMbit = 400
	// queueLimit holds a whole flight, 128 PSNs (qp's maxUnackedPSNs)
	// of 4 KiB, twice over: the shaper itself drops nothing, and every
	// loss is the nftables rule's.
	queueLimit = 1 << 20
	// nftTable is the table of drop rules in each namespace that drops.
	nftTable = "uroce_loss"
)

// dropPoint is where a link drops: a hook in one namespace and, per
// direction, the packets there that travel it.
type dropPoint struct {
	ns   *netns.NS
	hook string // "input" in a host, "forward" in a router
	// fwd and rev match the packets toward the responder (requests) and
	// toward the requester (ACKs), or "-" for a direction that does not
	// pass here.
	fwd, rev string
}

// topo is one link between the requester's namespace and the responder's.
type topo struct {
	about             string // how the table's heading describes it
	reqNS, respNS     *netns.NS
	reqAddr, respAddr netip.Addr
	drops             []dropPoint
	shaper            *netns.NS // the router, or nil
	shaperDev         string    // the shaped interface in shaper
	veths             []netns.Veth
}

func run(t *testing.T, ns *netns.NS, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// steer makes each veth end keep a flow on one CPU's backlog. A veth
// hands a packet to the backlog of the CPU that sent it, so a sender whose
// thread moves between CPUs reorders its own flow, and each reordering
// costs a go-back-N (measured in tests/ccbottleneck: thousands of
// retransmissions a run with no drop anywhere). RPS hashes a flow to one
// CPU, as a NIC's receive queues keep a flow in order; what is left to
// recover from is the rule's drops.
func steer(t *testing.T, vs ...netns.Veth) {
	for _, v := range vs {
		run(t, v.NS, "", "sh", "-c", fmt.Sprintf("echo 3 > /sys/class/net/%s/queues/rx-0/rps_cpus", v.Name))
	}
}

// vethTopo is two namespaces joined by one veth pair, each host dropping
// at its own input.
func vethTopo(t *testing.T) *topo {
	p := netns.NewPair(t, netns.PairConfig{MTU: linkMTU, StaticNeighbors: true,
		A: []netip.Prefix{netip.MustParsePrefix("10.78.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.78.0.2/24")}})
	steer(t, p.A, p.B)
	return &topo{
		about: fmt.Sprintf("a veth pair (MTU %d), each host dropping at its input", linkMTU),
		reqNS: p.A.NS, respNS: p.B.NS, reqAddr: p.AddrA, respAddr: p.AddrB,
		drops: []dropPoint{
			{ns: p.B.NS, hook: "input", fwd: "", rev: "-"},
			{ns: p.A.NS, hook: "input", fwd: "-", rev: ""},
		},
		veths: []netns.Veth{p.A, p.B},
	}
}

// dumbbellTopo is requester → router → responder, the router forwarding
// in the kernel, shaping its egress toward the responder with tbf and
// dropping on its forward hook both ways: the bottleneck of
// tests/ccbottleneck with one flow and no ECN marking.
func dumbbellTopo(t *testing.T) *topo {
	router, req, resp := netns.New(t), netns.New(t), netns.New(t)
	qv, rq := netns.NewVeth(t, req, router)
	rs, sv := netns.NewVeth(t, router, resp)
	for _, v := range []netns.Veth{qv, rq, rs, sv} {
		v.SetMTU(t, linkMTU)
	}
	qv.AddAddr(t, netip.MustParsePrefix("10.78.1.2/24"))
	rq.AddAddr(t, netip.MustParsePrefix("10.78.1.1/24"))
	rs.AddAddr(t, netip.MustParsePrefix("10.78.2.1/24"))
	sv.AddAddr(t, netip.MustParsePrefix("10.78.2.2/24"))
	run(t, req, "", "ip", "route", "add", "default", "via", "10.78.1.1")
	run(t, resp, "", "ip", "route", "add", "default", "via", "10.78.2.1")
	run(t, router, "", "sysctl", "-qw", "net.ipv4.ip_forward=1")
	steer(t, qv, rq, rs, sv)
	run(t, router, "", "tc", "qdisc", "add", "dev", rs.Name, "root", "tbf",
		"rate", fmt.Sprintf("%dmbit", bottleneckMbit), "burst", "64kb", "limit", fmt.Sprint(queueLimit))
	return &topo{
		about: fmt.Sprintf("a dumbbell (MTU %d) through a router shaping to %d Mb/s (tbf, %d KiB queue), dropping on its forward hook",
			linkMTU, bottleneckMbit, queueLimit>>10),
		reqNS: req, respNS: resp,
		reqAddr: netip.MustParseAddr("10.78.1.2"), respAddr: netip.MustParseAddr("10.78.2.2"),
		drops: []dropPoint{{ns: router, hook: "forward",
			fwd: fmt.Sprintf("iifname %q ", rq.Name), rev: fmt.Sprintf("iifname %q ", rs.Name)}},
		shaper: router, shaperDev: rs.Name,
		veths: []netns.Veth{qv, rq, rs, sv},
	}
}

// setLoss replaces the drop rules: pct % of the RoCEv2 packets each way,
// chosen at random, counted in the named counters to_responder and
// to_requester. Replacing the table zeroes the counters.
func (tp *topo) setLoss(t *testing.T, pct int) {
	t.Helper()
	for _, d := range tp.drops {
		var rules strings.Builder
		for _, dir := range []struct{ name, match string }{{"to_responder", d.fwd}, {"to_requester", d.rev}} {
			if dir.match == "-" || pct == 0 {
				continue
			}
			fmt.Fprintf(&rules, "\t\t%sudp dport 4791 numgen random mod 100 < %d counter name %q drop\n", dir.match, pct, dir.name)
		}
		// Adding the table first makes the delete succeed on the first
		// load too: the file replaces the table in one transaction.
		run(t, d.ns, fmt.Sprintf(`add table ip %[1]s
delete table ip %[1]s
table ip %[1]s {
	counter to_responder {}
	counter to_requester {}
	chain lossy {
		type filter hook %[2]s priority 0; policy accept;
%[3]s	}
}
`, nftTable, d.hook, rules.String()), "nft", "-f", "-")
	}
}

// dropped reads the rules' counters: the packets dropped toward the
// responder and toward the requester since setLoss.
func (tp *topo) dropped(t *testing.T) (fwd, rev uint64) {
	t.Helper()
	for _, d := range tp.drops {
		out := run(t, d.ns, "", "nft", "-j", "list", "counters", "table", "ip", nftTable)
		var doc struct {
			Nftables []struct {
				Counter *struct {
					Name    string `json:"name"`
					Packets uint64 `json:"packets"`
				} `json:"counter"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("nft -j list counters: %v: %s", err, out)
		}
		for _, o := range doc.Nftables {
			switch c := o.Counter; {
			case c == nil:
			case c.Name == "to_responder":
				fwd += c.Packets
			case c.Name == "to_requester":
				rev += c.Packets
			}
		}
	}
	return fwd, rev
}

// pathDrops are the path's losses besides the rules': the hosts' UDP
// sockets' for a full buffer (/proc/net/snmp in each namespace), the
// veths' own (a full backlog) and the shaper's queue overflowing. They
// should stay 0; a number here is loss the retransmissions answer too.
type pathDrops struct{ udp, veth, queue uint64 }

func (d pathDrops) sum() uint64 { return d.udp + d.veth + d.queue }

func (d pathDrops) add(o pathDrops) pathDrops {
	return pathDrops{d.udp + o.udp, d.veth + o.veth, d.queue + o.queue}
}

func (d pathDrops) sub(o pathDrops) pathDrops {
	return pathDrops{d.udp - o.udp, d.veth - o.veth, d.queue - o.queue}
}

func (tp *topo) pathDrops(t *testing.T) pathDrops {
	t.Helper()
	var d pathDrops
	for _, ns := range []*netns.NS{tp.reqNS, tp.respNS} {
		st, err := ns.UDPStats()
		if err != nil {
			t.Fatal(err)
		}
		d.udp += st["RcvbufErrors"] + st["SndbufErrors"]
	}
	for _, v := range tp.veths {
		l, err := v.NS.Netlink().LinkByIndex(v.Index)
		if err != nil {
			t.Fatal(err)
		}
		if s := l.Attrs().Statistics; s != nil {
			d.veth += s.RxDropped + s.TxDropped
		}
	}
	if tp.shaper == nil {
		return d
	}
	nl := tp.shaper.Netlink()
	l, err := nl.LinkByName(tp.shaperDev)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := nl.QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Statistics != nil && a.Statistics.Queue != nil {
			d.queue += uint64(a.Statistics.Queue.Drops)
		}
	}
	return d
}
