package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/internal/perftestcap"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// sent is one RoCE packet a recorded link sent (BTH through ICRC), in the
// order of both links together.
type sent struct {
	fromClient bool
	b          []byte
}

// recorder keeps, in order, what two links send.
type recorder struct {
	mu   sync.Mutex
	pkts []sent
}

func (r *recorder) all() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.pkts...)
}

// recLink is a link that records every packet it sends.
type recLink struct {
	link.Link
	r      *recorder
	client bool
}

func (l *recLink) Send(pkts []*link.Packet) (int, error) {
	l.r.mu.Lock()
	for _, p := range pkts {
		l.r.pkts = append(l.r.pkts, sent{l.client, append([]byte(nil), p.RoCE()...)})
	}
	l.r.mu.Unlock()
	return l.Link.Send(pkts)
}

func (l *recLink) Wake() {
	if w, ok := l.Link.(link.Waker); ok {
		w.Wake()
	}
}

// cmPair runs a test with -R, server and client in this process on two
// loopback devices, and returns both outputs; rec, when set, records what
// both devices send.
func cmPair(t *testing.T, test string, rec *recorder, flags ...string) (srvOut, cliOut string, srvDev, cliDev *verbs.Device) {
	t.Helper()
	return cmPairWith(t, test, rec, nil, flags...)
}

// cmPairWith is cmPair with tweak, when set, changing the two sides'
// parsed configurations before they run.
func cmPairWith(t *testing.T, test string, rec *recorder, tweak func(srv, cli *config), flags ...string) (srvOut, cliOut string, srvDev, cliDev *verbs.Device) {
	t.Helper()
	srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, test, append([]string{"-R"}, flags...)...)
	if tweak != nil {
		tweak(srvCfg, cliCfg)
	}
	open := func(a netip.Addr, client bool) *verbs.Device {
		l, err := udp.Open(udp.Config{Addr: a})
		if err != nil {
			t.Fatal(err)
		}
		var ll link.Link = l
		if rec != nil {
			ll = &recLink{Link: l, r: rec, client: client}
		}
		d := verbs.Open(ll, verbs.Inline())
		t.Cleanup(func() { d.Close() })
		return d
	}
	srvDev, cliDev = open(srvAddr, false), open(cliAddr, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	so := newBannerWriter(waitingBanner)
	var co bytes.Buffer
	srvErr := make(chan error, 1)
	go func() {
		_, err := runCM(ctx, srvCfg, srvDev, "udp:"+srvAddr.String(), so)
		srvErr <- err
	}()
	// As perftest is run, the client starts once the server listens: a
	// client first is refused (TestRDMACMNoServer).
	select {
	case <-so.seen:
	case err := <-srvErr:
		srvErr <- err
	case <-ctx.Done():
	}
	_, cerr := runCM(ctx, cliCfg, cliDev, "udp:"+cliAddr.String(), &co)
	if cerr != nil {
		cancel()
	}
	serr := <-srvErr
	if cerr != nil || serr != nil {
		t.Fatalf("%s -R: %v\nserver:\n%s\nclient:\n%s", test, errors.Join(clientErr(cerr), serverErr(serr)), so.String(), co.String())
	}
	return so.String(), co.String(), srvDev, cliDev
}

// bannerWriter collects a server's output and closes seen once it holds
// the banner.
type bannerWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	banner string
	seen   chan struct{}
}

func newBannerWriter(banner string) *bannerWriter {
	return &bannerWriter{banner: banner, seen: make(chan struct{})}
}

func (w *bannerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.b.String(), w.banner)
	w.b.Write(p)
	if !had && strings.Contains(w.b.String(), w.banner) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *bannerWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestRDMACMLoopback runs tests with -R, both roles uroce: the QPs
// connected by rdma_cm, the exchange over its RC SENDs, no TCP.
func TestRDMACMLoopback(t *testing.T) {
	tests := []struct {
		test        string
		flags       []string
		size, iters int
		serverTable bool
	}{
		{"write_lat", []string{"-s", "2", "-n", "100"}, 2, 100, true},
		{"write_lat", []string{"-s", "4096", "-n", "100", "-m", "1024"}, 4096, 100, true},
		{"send_bw", []string{"-s", "4096", "-n", "200", "-t", "32", "-r", "64"}, 4096, 200, true},
		{"send_bw", []string{"-s", "2", "-n", "200"}, 2, 200, true},
		{"send_lat", []string{"-s", "64", "-n", "100"}, 64, 100, true},
		{"read_lat", []string{"-s", "64", "-n", "100"}, 64, 100, false},
		{"write_bw", []string{"-s", "8192", "-n", "100", "-q", "2"}, 8192, 100, true},
		{"read_bw", []string{"-s", "4096", "-n", "100"}, 4096, 100, true},
		{"atomic_lat", []string{"-n", "100"}, 8, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.test+"/"+strings.Join(tt.flags, "_"), func(t *testing.T) {
			so, co, sd, cd := cmPair(t, tt.test, nil, tt.flags...)
			rows := tableRows(t, co)
			if len(rows) != 1 || int(rows[0]["#bytes"]) != tt.size || int(rows[0]["#iterations"]) != tt.iters {
				t.Fatalf("client rows %v, want %d B × %d:\n%s", rows, tt.size, tt.iters, co)
			}
			if strings.Contains(so, "#bytes") != tt.serverTable {
				t.Errorf("server table printed: %v, want %v:\n%s", !tt.serverTable, tt.serverTable, so)
			}
			for _, out := range []string{so, co} {
				if !strings.Contains(out, " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n") {
					t.Errorf("banner does not say rdma_cm:\n%s", out)
				}
			}
			// Both connections were made and torn down by the CM.
			for _, d := range []*verbs.Device{sd, cd} {
				if c := d.Counters(); c.RxPackets == 0 {
					t.Errorf("device received nothing: %+v", c)
				}
			}
		})
	}
}

// TestRDMACMNoServer: a client whose server does not listen is refused
// (REJ "invalid service ID", as the kernel answers for a port nobody
// listens on) and fails at once with the refusal, as perftest's client
// does, not after --timeout.
func TestRDMACMNoServer(t *testing.T) {
	k, _ := kindByName("write_lat")
	srvAddr, cliAddr := loopbackPair(t)
	cfg, err := parseArgs(k, []string{"-R", "--timeout", "10m", srvAddr.String()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// A device at the server's address with a CM but no listener.
	openCM(t, srvAddr)
	cli, err := verbs.OpenAddr(cliAddr, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var out bytes.Buffer
	_, err = runCM(context.Background(), cfg, cli, "cli", &out)
	if !errors.Is(err, rdmacm.ErrRefused) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("client without a server: %v, want the refusal at once", err)
	}
	if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("nobody listens on port %d there", cfg.port)) {
		t.Errorf("client without a server: %v, want the port and what to do", err)
	}
}

// openCM opens a device on a and its CM, both closed at the test's end.
func openCM(t *testing.T, a netip.Addr) (*verbs.Device, *rdmacm.CM) {
	t.Helper()
	d, err := verbs.OpenAddr(a, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := rdmacm.Open(d, rdmacm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return d, m
}

// TestRDMACMTestConnRetries: the test's QP connections, unlike the
// exchange's, are dialled again while the server refuses, as perftest's
// client retries while its server listens anew, and connect once it
// listens.
func TestRDMACMTestConnRetries(t *testing.T) {
	srvAddr, cliAddr := loopbackPair(t)
	srv, srvCM := openCM(t, srvAddr)
	cli, cliCM := openCM(t, cliAddr)
	ctx := context.Background()
	qp := func(d *verbs.Device) *verbs.QueuePair {
		m, err := newMsgConn(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m.qp
	}
	const port = 18515
	cs := &cmSide{ctx: ctx, cfg: &config{timeout: 10 * time.Minute}, m: cliCM, peer: netip.AddrPortFrom(srvAddr, port)}
	defer cs.disconnect()
	// Refused, and no retry: the exchange's connection.
	if err := cs.connect(qp(cli), false); !errors.Is(err, rdmacm.ErrRefused) {
		t.Fatalf("exchange connection without a listener: %v, want the refusal", err)
	}
	// The server listens only after the client has been refused at
	// least once (the attempt above took a REQ and its REJ).
	srvQP := qp(srv)
	accepted := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := srvCM.Listen(port)
		if err != nil {
			accepted <- err
			return
		}
		defer l.Close()
		req, err := l.Accept(ctx)
		if err != nil {
			accepted <- err
			return
		}
		c, err := req.Accept(ctx, srvQP, &rdmacm.Params{})
		if err == nil {
			t.Cleanup(func() { c.Disconnect() })
		}
		accepted <- err
	}()
	if err := cs.connect(qp(cli), true); err != nil {
		t.Fatalf("test connection: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// roce is one parsed packet of a recording.
type roce struct {
	fromClient bool
	op         bth.Opcode
	destQP     uint32
	payload    []byte
}

func parseSent(t *testing.T, pkts []sent) []roce {
	t.Helper()
	var out []roce
	for _, p := range pkts {
		b := p.b
		if len(b) < bth.BTHLen+4 {
			t.Fatalf("short packet %x", b)
		}
		h := bth.BTH(b)
		body := b[bth.BTHLen : len(b)-4-h.PadCnt()]
		switch h.Opcode() {
		case bth.UDSendOnly:
			body = body[8:] // DETH
		case bth.RCSendOnly:
		default:
			continue
		}
		out = append(out, roce{p.fromClient, h.Opcode(), h.DestQP(), body})
	}
	return out
}

// captureSent returns the RoCE packets of a capture as recorded sends,
// the client being the side that sent the first REQ.
func captureSent(t *testing.T, file string) []sent {
	t.Helper()
	f, err := pcapfile.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []sent
	var client netip.Addr
	for _, r := range f.Records {
		var fr bth.Frame
		if err := fr.Decode(r.Data); err != nil {
			continue
		}
		d := fr.Datagram()
		b := d[len(d)-int(fr.UDP().Length())+bth.UDPLen:]
		if !client.IsValid() && bth.BTH(b).Opcode() == bth.UDSendOnly {
			client = fr.IPv4().Src()
		}
		out = append(out, sent{fr.IPv4().Src() == client, b})
	}
	return out
}

// exchangeSteps names the CM messages and exchange SENDs in order, as
// "c:REQ", "s:SEND16", up to the first packet of the test QP's traffic
// (any other RC packet than a SEND or an ACK) or a DREQ; the rest are the
// teardown's MADs.
func exchangeSteps(t *testing.T, pkts []roce) (setup []string, teardown []mad.MAD, tdFrom []bool) {
	t.Helper()
	for _, p := range pkts {
		side := "s:"
		if p.fromClient {
			side = "c:"
		}
		if p.op == bth.UDSendOnly {
			m, err := mad.DecodeCM(p.payload)
			if err != nil {
				t.Fatalf("MAD: %v", err)
			}
			if a := m.Header().AttrID(); a == mad.AttrDREQ || a == mad.AttrDREP || len(teardown) > 0 {
				teardown, tdFrom = append(teardown, m), append(tdFrom, p.fromClient)
				continue
			}
			setup = append(setup, side+m.Header().AttrID().String())
			continue
		}
		if len(teardown) == 0 {
			setup = append(setup, fmt.Sprintf("%sSEND%d", side, len(p.payload)))
		}
	}
	return setup, teardown, tdFrom
}

// rtuFirst moves a client's RTU in front of the client SENDs that
// overtook it. The RTU leaves from QP1 and the exchange's first SEND from
// another QP, posted once Dial returns; the engine does not order packets
// of different QPs, and either one establishes the passive side (IBA
// 12.9.6), so the capture's order is one of two right ones.
func rtuFirst(steps []string) []string {
	out := append([]string(nil), steps...)
	for i := 1; i < len(out); i++ {
		if out[i] != "c:RTU" {
			continue
		}
		j := i
		for j > 0 && strings.HasPrefix(out[j-1], "c:SEND") {
			out[j-1], out[j] = out[j], out[j-1]
			j--
		}
	}
	return out
}

// TestRDMACMGolden checks write_lat -R's wire exchange against
// ib_write_lat -R's on rxe (testdata/rxe-captures/ib_write_lat_rdmacm.pcap):
// the same CM messages in the same order around the same exchange SENDs,
// the same sizes, the same bytes where they do not depend on the host,
// the same REQ and REP fields where rdma_cm sets them, and each
// connection ended by one DREQ and its DREP.
func TestRDMACMGolden(t *testing.T) {
	const capture = "../../testdata/rxe-captures/ib_write_lat_rdmacm.pcap"
	theirs := parseSent(t, captureSent(t, capture))
	rec := &recorder{}
	cmPair(t, "write_lat", rec, "-s", "64", "-n", "20", "-m", "1024")
	ours := parseSent(t, rec.all())

	wantSetup, wantTD, wantFrom := exchangeSteps(t, theirs)
	gotSetup, gotTD, gotFrom := exchangeSteps(t, ours)
	gotSetup = rtuFirst(gotSetup)
	if strings.Join(gotSetup, " ") != strings.Join(wantSetup, " ") {
		t.Errorf("exchange:\n got %v\nwant %v", gotSetup, wantSetup)
	}

	// The exchange's bytes: version, page size, cache line and MTU are
	// the host's, equal here; the first two Dests zero; the later ones
	// name the test QP with out_reads 1.
	capx, err := perftestcap.CMStreams(capture)
	if err != nil {
		t.Fatal(err)
	}
	var sends [2][][]byte // server's, client's
	var reqs []mad.REQFields
	var reps []mad.REPFields
	for _, p := range ours {
		if p.op == bth.RCSendOnly && p.destQP != 0 && len(gotTD) > 0 {
			i := 0
			if p.fromClient {
				i = 1
			}
			sends[i] = append(sends[i], p.payload)
		}
		if p.op == bth.UDSendOnly {
			m, _ := mad.DecodeCM(p.payload)
			switch m.Header().AttrID() {
			case mad.AttrREQ:
				reqs = append(reqs, m.REQ().Fields())
			case mad.AttrREP:
				reps = append(reps, m.REP().Fields())
			}
		}
	}
	for side, want := range [2][][]byte{capx.ServerSends, capx.ClientSends} {
		got := sends[side]
		if len(got) < len(want) {
			t.Fatalf("side %d sent %d messages, perftest %d", side, len(got), len(want))
		}
		for i := range 6 {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("side %d message %d: %x, perftest %x", side, i, got[i], want[i])
			}
		}
	}
	if len(reqs) != 2 || len(reps) != 2 {
		t.Fatalf("%d REQs and %d REPs, want 2 each", len(reqs), len(reps))
	}
	var capREQ []mad.REQFields
	var capREP []mad.REPFields
	for _, m := range capx.MADs {
		switch m.MAD.Header().AttrID() {
		case mad.AttrREQ:
			capREQ = append(capREQ, m.MAD.REQ().Fields())
		case mad.AttrREP:
			capREP = append(capREP, m.MAD.REP().Fields())
		}
	}
	for i := range 2 {
		g, w := reqs[i], capREQ[i]
		// Both connections go to perftest's port in the TCP port space.
		if g.ServiceID != w.ServiceID || g.TransportService != w.TransportService || g.PathMTU != w.PathMTU ||
			g.RetryCount != w.RetryCount || g.RNRRetryCount != w.RNRRetryCount || g.EndToEndFlowControl != w.EndToEndFlowControl {
			t.Errorf("REQ %d: %+v\nperftest's %+v", i, g, w)
		}
		// rdma_cm's header, then no application data (perftest's
		// conn_param has none).
		gh, wh := mad.CMAHeader(g.PrivateData).Fields(), mad.CMAHeader(w.PrivateData).Fields()
		if gh.Version != wh.Version || gh.IPVersion != wh.IPVersion || !bytes.Equal(g.PrivateData[mad.CMAHeaderLen:], w.PrivateData[mad.CMAHeaderLen:]) {
			t.Errorf("REQ %d private data %x\nperftest's %x", i, g.PrivateData, w.PrivateData)
		}
		// perftest's write test asks for no READ resources (0); rdmacm
		// offers at least 1, which changes nothing for WRITEs.
		if g.ResponderResources != 1 || g.InitiatorDepth != 1 || w.ResponderResources != 0 {
			t.Errorf("REQ %d READ resources %d/%d (perftest's %d/%d)", i, g.ResponderResources, g.InitiatorDepth, w.ResponderResources, w.InitiatorDepth)
		}
		if !bytes.Equal(reps[i].PrivateData, capREP[i].PrivateData) || reps[i].RNRRetryCount != capREP[i].RNRRetryCount {
			t.Errorf("REP %d: %+v\nperftest's %+v", i, reps[i], capREP[i])
		}
	}
	if reqs[0].LocalQPN == reqs[1].LocalQPN {
		t.Errorf("both connections on QP %#x", reqs[0].LocalQPN)
	}

	// Teardown: the server disconnects the test's connection, then the
	// exchange's, the client answers each; by communication IDs, each
	// connection ends with one DREQ and one DREP.
	var gotOrder, wantOrder []string
	for i, m := range gotTD {
		gotOrder = append(gotOrder, fmt.Sprint(gotFrom[i], m.Header().AttrID()))
	}
	for i, m := range wantTD {
		wantOrder = append(wantOrder, fmt.Sprint(wantFrom[i], m.Header().AttrID()))
	}
	if !slices.Equal(gotOrder, wantOrder) {
		t.Errorf("teardown (from client?, message):\n got %v\nwant %v", gotOrder, wantOrder)
	}
	if len(wantTD) != 4 || len(gotTD) != 4 {
		t.Fatalf("teardown: %d MADs, perftest %d", len(gotTD), len(wantTD))
	}
	type conn struct{ dreq, drep int }
	byID := map[uint32]*conn{}
	for i, m := range gotTD {
		switch m.Header().AttrID() {
		case mad.AttrDREQ:
			id := m.DREQ().LocalCommID()
			if byID[id] == nil {
				byID[id] = &conn{}
			}
			byID[id].dreq++
		case mad.AttrDREP:
			id := m.DREP().RemoteCommID()
			if byID[id] == nil {
				byID[id] = &conn{}
			}
			byID[id].drep++
			if gotFrom[i] == gotFrom[i-1] && gotTD[i-1].Header().AttrID() == mad.AttrDREQ && gotTD[i-1].DREQ().LocalCommID() == id {
				t.Errorf("DREP from the DREQ's sender")
			}
		}
	}
	if len(byID) != 2 {
		t.Errorf("teardown of %d connections, want 2", len(byID))
	}
	for id, c := range byID {
		if c.dreq != 1 || c.drep != 1 {
			t.Errorf("connection %#x: %d DREQ, %d DREP", id, c.dreq, c.drep)
		}
	}
}

// TestRDMACMSameHost: -R between two ends on one host. A client given the
// address of the server's device, on this host, sits beside it on another
// address (the kernel's source for it, else loopback) and connects; given
// its own address, or a local one where no device listens, it fails at
// once with what is wrong instead of sending its REQ to itself and being
// refused ("invalid service ID") until --timeout.
func TestRDMACMSameHost(t *testing.T) {
	srvAddr, cliAddr := loopbackPair(t)
	port := freePort(t)
	k, _ := kindByName("write_lat")
	srvCfg, err := parseArgs(k, []string{"-R", "-n", "20", "-p", port, "--timeout", "2m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srvDev, err := verbs.OpenAddr(srvAddr, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	defer srvDev.Close()
	so := newBannerWriter(waitingBanner)
	srvErr := make(chan error, 1)
	go func() {
		_, err := runCM(context.Background(), srvCfg, srvDev, "srv", so)
		srvErr <- err
	}()
	select {
	case <-so.seen:
	case err := <-srvErr:
		t.Fatalf("server: %v", err)
	}
	// The client picks its own address (no --ip, no -d).
	var co, ce bytes.Buffer
	if code := mainCode([]string{"write_lat", "-R", "-n", "20", "-p", port, "--timeout", "2m", srvAddr.String()}, &co, &ce); code != 0 {
		t.Errorf("client beside the server: exit %d\nstdout:\n%s\nstderr:\n%s", code, co.String(), ce.String())
	}
	if err := <-srvErr; err != nil {
		t.Errorf("server: %v\n%s", err, so.String())
	}
	if rows := tableRows(t, co.String()); len(rows) != 1 || rows[0]["#iterations"] != 20 {
		t.Errorf("client rows %v:\n%s", rows, co.String())
	}

	// Nothing listens at either address now, as when the server's
	// process has ended.
	srvDev.Close()
	runCLI(t, []cliCase{
		{name: "own address", args: []string{"write_lat", "-R", "-p", port, "--ip", cliAddr.String(), cliAddr.String()}, code: 1,
			once: "-R: " + cliAddr.String() + " is this client's own address, so its connection request would come back to itself", noOut: true},
		{name: "nobody there", args: []string{"write_lat", "-R", "-p", port, srvAddr.String()}, code: 1,
			once: "-R: no RoCE device listens on " + srvAddr.String() + ", this host's address", noOut: true},
		{name: "nobody there, client elsewhere", args: []string{"write_lat", "-R", "-p", port, "--ip", cliAddr.String(), srvAddr.String()}, code: 1,
			once: "-R: no RoCE device listens on " + srvAddr.String() + ", this host's address", noOut: true},
	})
}
