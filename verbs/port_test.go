package verbs_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afpacket"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// portGoroutines counts the goroutines that follow a port's interface:
// the watch's own and the netlink subscription's.
func portGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "netinfo.(*LinkWatch).run") || strings.Contains(g, "netlink.linkSubscribeAt") {
			count++
		}
	}
	return count
}

// setLinkUp sets a veth end up or down from its own namespace.
func setLinkUp(t *testing.T, v netns.Veth, up bool) {
	t.Helper()
	nl := v.NS.Netlink()
	l, err := nl.LinkByIndex(v.Index)
	if err != nil {
		t.Fatal(err)
	}
	if up {
		err = nl.LinkSetUp(l)
	} else {
		err = nl.LinkSetDown(l)
	}
	if err != nil {
		t.Fatalf("set %s up=%v: %v", v.Name, up, err)
	}
}

// TestPortState: a device on one end of a veth pair, with the udp backend
// on the end's address and with afpacket on the end itself, follows the
// end's state: down when the peer goes down (carrier lost) and when the
// end itself does, active again after. Each down counts once in
// LinkDowned (and in the metrics page's link_downed), each change comes
// out of GetAsyncEvent in order, and Close stops following.
func TestPortState(t *testing.T) {
	backends := []struct {
		name string
		open func(p *netns.Pair) (*verbs.Device, error)
	}{
		{"udp", func(p *netns.Pair) (*verbs.Device, error) {
			a, _ := p.Addr(4)
			return verbs.OpenAddr(a, verbs.Inline())
		}},
		{"afpacket", func(p *netns.Pair) (*verbs.Device, error) {
			a, _ := p.Addr(4)
			l, err := afpacket.Open(afpacket.Config{Ifname: p.A.Name, Addr: a})
			if err != nil {
				return nil, err
			}
			return verbs.Open(l, verbs.Inline()), nil
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			p := netns.NewPair(t, netns.PairConfig{})
			base := portGoroutines()
			var d *verbs.Device
			if err := p.A.NS.Do(func() (err error) { d, err = b.open(p); return err }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if a := d.QueryPort(); a.State != verbs.PortActive || a.Netdev != p.A.Name || a.ActiveMTU != 1024 || a.GIDTblLen != 1 {
				t.Fatalf("QueryPort = %+v, want active on %s, MTU 1024", a, p.A.Name)
			}
			if n := portGoroutines(); n <= base {
				t.Fatalf("%d port goroutines with the device open, %d before", n, base)
			}
			srv, err := metrics.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			if err := srv.Register(d, "port0"); err != nil {
				t.Fatal(err)
			}

			steps := []struct {
				name   string
				end    netns.Veth
				up     bool
				event  verbs.AsyncEventType
				state  verbs.PortState
				downed uint64
			}{
				{"peer down", p.B, false, verbs.EventPortErr, verbs.PortDown, 1},
				{"peer up", p.B, true, verbs.EventPortActive, verbs.PortActive, 1},
				{"own down", p.A, false, verbs.EventPortErr, verbs.PortDown, 2},
				{"own up", p.A, true, verbs.EventPortActive, verbs.PortActive, 2},
			}
			for _, s := range steps {
				setLinkUp(t, s.end, s.up)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ev, err := d.GetAsyncEvent(ctx)
				cancel()
				if err != nil || ev.Type != s.event || ev.Port != 1 || ev.SRQ != nil {
					t.Fatalf("%s: event %+v (%v), %v; want %v on port 1", s.name, ev, ev.Type, err, s.event)
				}
				if c := d.Counters(); c.LinkDowned != s.downed {
					t.Fatalf("%s: LinkDowned %d, want %d", s.name, c.LinkDowned, s.downed)
				}
				if st := d.QueryPort().State; st != s.state {
					t.Fatalf("%s: port %v, want %v", s.name, st, s.state)
				}
			}
			// Four changes, four events: nothing more comes.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			ev, err := d.GetAsyncEvent(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("an event more than the changes: %+v (%v), %v", ev, ev.Type, err)
			}
			if n := d.AsyncEventsLost(); n != 0 {
				t.Fatalf("%d events lost", n)
			}

			resp, err := http.Get(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			const want = `uroce_link_downed_total{device="port0"} 2`
			if !strings.Contains(string(body), want+"\n") {
				t.Fatalf("metrics page has no %q", want)
			}

			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			// The subscription's goroutine may still be on its way out
			// once it has closed its channel.
			deadline := time.Now().Add(10 * time.Second)
			for portGoroutines() != base {
				if time.Now().After(deadline) {
					t.Fatalf("%d port goroutines after Close, %d before Open", portGoroutines(), base)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// TestPortNoNetdev: links with no interface of their own (a pipe, a udp
// link on loopback) are always active and follow nothing.
func TestPortNoNetdev(t *testing.T) {
	base := portGoroutines()
	la, lb := pipe.New(pipe.Config{})
	lu, err := udp.Open(udp.Config{Addr: netip.MustParseAddr("127.78.0.1"), Port: 24791})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*verbs.Device{verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline()), verbs.Open(lu, verbs.Inline())} {
		a := d.QueryPort()
		if a.State != verbs.PortActive || a.Netdev != "" {
			t.Errorf("%s: QueryPort = %+v, want active with no netdev", d.Link().Info().Kind, a)
		}
		if n := portGoroutines(); n != base {
			t.Errorf("%s: %d port goroutines, want %d", d.Link().Info().Kind, n, base)
		}
		if c := d.Counters(); c.LinkDowned != 0 {
			t.Errorf("LinkDowned %d", c.LinkDowned)
		}
		d.Close()
	}
	for _, s := range []verbs.PortState{verbs.PortDown, verbs.PortActive, 0} {
		if s.String() == "" {
			t.Errorf("PortState(%d) has no name", s)
		}
	}
	if verbs.EventPortErr.String() != "port error" || verbs.EventPortActive.String() != "port active" {
		t.Errorf("event names %q, %q", verbs.EventPortErr, verbs.EventPortActive)
	}
}

// waitPortEvent takes the device's next event and checks its type.
func waitPortEvent(t *testing.T, d *verbs.Device, want verbs.AsyncEventType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev, err := d.GetAsyncEvent(ctx); err != nil || ev.Type != want {
		t.Fatalf("event %+v (%v), %v; want %v", ev, ev.Type, err, want)
	}
}

// TestPortDownKeepsQPs: a port going down leaves its QPs as they are, as
// rxe does. A WRITE posted while the port is down does not go out (a
// send error), and is delivered by a retry once the port is back; with a
// retry budget shorter than the outage it fails with WCRetryExcErr, the
// QP moving to ERR as after any retry exhaustion.
func TestPortDownKeepsQPs(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	a4, b4 := p.Addr(4)
	var da, db *verbs.Device
	if err := p.A.NS.Do(func() (err error) { da, err = verbs.OpenAddr(a4, verbs.Inline()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { da.Close() })
	if err := p.B.NS.Do(func() (err error) { db, err = verbs.OpenAddr(b4, verbs.Inline()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.Start() // the responder answers on its own
	pda, pdb := da.AllocPD(), db.AllocPD()
	ca, cb := da.CreateCQ(16), db.CreateCQ(16)
	ma, err := pda.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := pdb.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  verbs.ConnectOptions
		want verbs.WCStatus
		qp   verbs.QPState
	}{
		// 8 tries 1.07 s apart outlast the outage.
		{"retry delivers", verbs.ConnectOptions{Timeout: 18, RetryCnt: 7}, verbs.WCSuccess, verbs.StateRTS},
		// 2 tries 4 ms apart run out while the port is down.
		{"retries run out", verbs.ConnectOptions{Timeout: 10, RetryCnt: 1}, verbs.WCRetryExcErr, verbs.StateErr},
	}
	for i, tc := range tests {
		qa, err := pda.CreateQP(&verbs.QPInit{SendCQ: ca, RecvCQ: ca, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := pdb.CreateQP(&verbs.QPInit{SendCQ: cb, RecvCQ: cb, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		ob := tc.opt
		ob.PSN = 500
		tc.opt.PSN = 100
		if err := qa.Connect(qb.Endpoint(500), tc.opt); err != nil {
			t.Fatal(err)
		}
		if err := qb.Connect(qa.Endpoint(100), ob); err != nil {
			t.Fatal(err)
		}

		setLinkUp(t, p.A, false)
		waitPortEvent(t, da, verbs.EventPortErr)
		if s := qa.State(); s != verbs.StateRTS {
			t.Fatalf("%s: QP %v with the port down", tc.name, s)
		}
		sendErrs := func() uint64 { return da.Counters().TxErrors + da.LinkStats().TxDropped }
		before := sendErrs()
		copy(ma.Buf(), tc.name)
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ma.SGE(0, 64)}, RemoteAddr: mb.Addr() + uint64(i*64), RKey: mb.RKey()}
		if err := qa.PostSend(&wr); err != nil {
			t.Fatalf("%s: PostSend with the port down: %v", tc.name, err)
		}
		if sendErrs() == before {
			t.Fatalf("%s: the WRITE went out with the port down", tc.name)
		}
		var wc [1]verbs.WC
		if tc.want != verbs.WCSuccess {
			// Let the retries run out before the port comes back.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := ca.Wait(ctx, wc[:])
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		setLinkUp(t, p.A, true)
		waitPortEvent(t, da, verbs.EventPortActive)
		if tc.want == verbs.WCSuccess {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := ca.Wait(ctx, wc[:])
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if wc[0].Status != tc.want || wc[0].WRID != uint64(i) {
			t.Fatalf("%s: completion %+v, want %v", tc.name, wc[0], tc.want)
		}
		if tc.want == verbs.WCSuccess && qa.Counters().Retransmits == 0 {
			t.Fatalf("%s: delivered without a retry", tc.name)
		}
		if s := qa.State(); s != tc.qp {
			t.Fatalf("%s: QP %v, want %v", tc.name, s, tc.qp)
		}
		db.Counters() // through B's engine goroutine: its writes happen before
		if got := string(mb.Buf()[i*64 : i*64+len(tc.name)]); (got == tc.name) != (tc.want == verbs.WCSuccess) {
			t.Fatalf("%s: peer's memory holds %q", tc.name, got)
		}
	}
	if c := da.Counters(); c.LinkDowned != uint64(len(tests)) {
		t.Fatalf("LinkDowned %d, want %d", c.LinkDowned, len(tests))
	}
}

// TestPathMTU checks the largest IB MTU whose requests (with RETH, ImmDt
// and the ICRC) fit a link: IPv4 or IPv6 headers, at and around the
// boundaries.
func TestPathMTU(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	for _, c := range []struct {
		mtu  int
		addr netip.Addr
		want int
	}{
		{1500, v4, 1024},
		{1500, v6, 1024},
		{9000, v4, 4096},
		{4096 + 20 + 8 + 36, v4, 4096}, // exactly room for 4096
		{4096 + 20 + 8 + 35, v4, 2048},
		{4096 + 40 + 8 + 36, v6, 4096},
		{4096 + 40 + 8 + 35, v6, 2048},
		{256 + 20 + 8 + 35, v4, 0},
	} {
		if got := verbs.PathMTU(link.Info{MTU: c.mtu, Addr: c.addr}); got != c.want {
			t.Errorf("PathMTU(MTU %d, %v) = %d, want %d", c.mtu, c.addr, got, c.want)
		}
	}
}
