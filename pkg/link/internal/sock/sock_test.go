package sock

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/pkg/link"
	"golang.org/x/sys/unix"
)

// pair opens a Conn on a loopback UDP socket and a plain socket that sends
// to it.
func pair(t *testing.T, batch int) (*Conn, func(n int)) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	lo := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, lo); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c Conn
	if err := c.Init(Config{Name: "test", FD: fd, Batch: batch, Buffers: 4 * batch, BufSize: 256}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close(func() { c.Free(); unix.Close(fd) })
		unix.Close(tx)
	})
	send := func(n int) {
		t.Helper()
		for range n {
			if err := unix.Sendto(tx, []byte("datagram"), 0, sa); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &c, send
}

// TestRecvAsk checks how many messages Recv asks recvmmsg for, against
// the traffic, and that the ask never costs a datagram.
func TestRecvAsk(t *testing.T) {
	const batch = 32
	c, send := pair(t, batch)
	pkts := make([]*link.Packet, batch)
	accept := func(int, *link.Packet) bool { return true }
	recv := func() int {
		t.Helper()
		n, err := c.Recv(pkts, accept)
		if err != nil {
			t.Fatal(err)
		}
		c.Release(pkts[:n])
		return n
	}
	// A ping-pong: empty polls, then one datagram. The ask stays at one.
	for range 20 {
		if n := recv(); n != 0 {
			t.Fatalf("empty poll got %d", n)
		}
		send(1)
		if n := recv(); n != 1 {
			t.Fatalf("got %d, want 1", n)
		}
		if c.rxWant > 1 {
			t.Fatalf("ping-pong: ask grew to %d", c.rxWant)
		}
	}
	// A backlog: the ask doubles call by call up to the batch, and every
	// datagram arrives.
	send(200)
	got, calls, most := 0, 0, 0
	for got < 200 {
		got += recv()
		calls++
		most = max(most, c.rxWant)
	}
	if got != 200 || most != batch {
		t.Fatalf("backlog: %d datagrams, largest ask %d; want 200 and %d", got, most, batch)
	}
	if calls > 12 {
		t.Fatalf("backlog of 200 took %d calls", calls)
	}
	// The queue drained with a short call: the ask drops to what it got.
	send(5)
	if n := recv(); n != 5 || c.rxWant != 5 {
		t.Fatalf("drain: got %d, ask %d; want 5 and 5", n, c.rxWant)
	}
}

// TestDst checks the checks every stage starts with, and their errors.
func TestDst(t *testing.T) {
	c, _ := pair(t, 4) // an IPv4 socket
	tests := []struct {
		remote string
		len    int
		want   error
		msg    string
	}{
		{"10.0.0.2", 16, nil, ""},
		{"::ffff:10.0.0.2", 16, nil, ""},
		{"fd00::2", 16, link.ErrNoRoute, "test: destination of the other address family: no route to destination"},
		{"", 16, link.ErrNoRoute, "test: destination of the other address family: no route to destination"},
		{"10.0.0.2", 15, nil, "test: packet shorter than BTH and ICRC"},
	}
	for _, tc := range tests {
		p := &link.Packet{Len: tc.len}
		if tc.remote != "" {
			p.Remote = netip.MustParseAddr(tc.remote)
		}
		dst, err := c.Dst(p)
		switch {
		case tc.msg == "" && (err != nil || dst != netip.MustParseAddr("10.0.0.2")):
			t.Errorf("%q %d: %v, %v", tc.remote, tc.len, dst, err)
		case tc.msg != "" && (err == nil || err.Error() != tc.msg || (tc.want != nil && !errors.Is(err, tc.want))):
			t.Errorf("%q %d: %v", tc.remote, tc.len, err)
		}
	}
	if err := c.ErrTooBig(); !errors.Is(err, link.ErrTooBig) || err.Error() != "test: "+link.ErrTooBig.Error() {
		t.Errorf("ErrTooBig: %v", err)
	}
}
