package interop_test

import (
	"fmt"
	"testing"

	"github.com/uroce/uroce/tests/interop/lab"
)

// tapQueueLen is the transmit queue the matrix gives the host's taps
// toward the guests. A tap queues 500 frames by default; uroce-perf, a
// native program, posts 128 WRs of 64 KiB (8192 frames at IB MTU 1024)
// faster than a TCG guest drains them, and the tap's overflow would look
// to both sides like loss on the wire. The queue is sized for the
// largest window plus its go-back-N retransmission.
const tapQueueLen = 20000

// guestTaps returns the lab's taps: the bridge's ports other than the
// veth to the Peer namespace.
func guestTaps(t *testing.T, l *lab.Lab) []string {
	t.Helper()
	nl := l.NS.Netlink()
	br, err := nl.LinkByName(l.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var taps []string
	for _, ln := range links {
		if a := ln.Attrs(); a.MasterIndex == br.Attrs().Index && ln.Type() == "tuntap" {
			taps = append(taps, a.Name)
		}
	}
	if len(taps) == 0 {
		t.Fatalf("no tap on bridge %s", l.Bridge)
	}
	return taps
}

// growTapQueues sets every guest tap's transmit queue to tapQueueLen.
func growTapQueues(t *testing.T, l *lab.Lab) {
	t.Helper()
	nl := l.NS.Netlink()
	for _, name := range guestTaps(t, l) {
		ln, err := nl.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetTxQLen(ln, tapQueueLen); err != nil {
			t.Fatalf("tap %s: txqueuelen %d: %v", name, tapQueueLen, err)
		}
	}
}

// tapDrops sums the frames the guests' taps dropped on their way to a
// guest so far.
func tapDrops(t *testing.T, l *lab.Lab) uint64 {
	t.Helper()
	var n uint64
	for _, name := range guestTaps(t, l) {
		ln, err := l.NS.Netlink().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		s := ln.Attrs().Statistics
		if s == nil {
			t.Fatal(fmt.Errorf("tap %s: no statistics", name))
		}
		n += s.TxDropped
	}
	return n
}
