package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
)

// TestLiveCapture captures a RoCE packet sent on the loopback interface of
// a throw-away namespace, prints it and writes it with -w.
func TestLiveCapture(t *testing.T) {
	netns.RequireRoot(t)
	ns := netns.New(t)
	lo, err := ns.Netlink().LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Netlink().LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		src  *liveSource
		conn *net.UDPConn
	)
	if err := ns.Do(func() error {
		var err error
		if src, err = openLive(ctx, "lo"); err != nil {
			return err
		}
		conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: bth.RoCEPort})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer conn.Close()

	pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 0x123456, PSN: 42, AckReq: true}}
	pkt := make([]byte, bth.PacketLen(bth.RCSendOnly, 8))
	if _, err := pf.Encode(pkt, []byte("uroce!!!")); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	w := filepath.Join(t.TempDir(), "live.pcap")
	d := newDumper(&out, options{qp: 0x123456, hasQP: true, count: 1})
	done := make(chan error, 1)
	go func() { done <- withWriter(d, w, src, func() error { return d.run(src) }) }()
	// The capture may start after the first send: send until it has seen
	// one. Errors (ICMP port unreachable: nobody listens) do not matter.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sent := false; !sent; {
		conn.Write(pkt)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			sent = true
		case <-tick.C:
		}
	}
	const want = "127.0.0.1 → 127.0.0.1 RC_SEND_ONLY qp=0x123456 psn=42 ackreq payload=8"
	if l := lines(out.String()); len(l) != 1 || !strings.Contains(l[0], want) {
		t.Errorf("live capture printed:\n%s\nwant one line with %q", out.String(), want)
	}
	got, _ := dumpFile(t, w, options{})
	if l := lines(got); len(l) != 1 || !strings.Contains(l[0], want) {
		t.Errorf("-w file holds:\n%s", got)
	}
}
