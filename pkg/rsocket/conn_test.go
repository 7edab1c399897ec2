package rsocket_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/pkg/netem"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

// pair connects two devices on a pipe link with rsocket streams.
func pair(t testing.TB) (client, server *rsocket.Conn) {
	t.Helper()
	la, lb := pipe.New(pipe.Config{Buffers: 4096})
	return connect(t, verbs.Open(la), verbs.Open(lb))
}

// connect makes a stream from da to db, and closes both devices after
// the test.
func connect(t testing.TB, da, db *verbs.Device) (client, server *rsocket.Conn) {
	t.Helper()
	t.Cleanup(func() { da.Close(); db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, db, ":7471")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rsocket.Conn, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := l.AcceptRsocket()
		if err != nil {
			errc <- err
			return
		}
		accepted <- c
	}()
	client, err = rsocket.Dial(ctx, da, db.Addr().String()+":7471")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case server = <-accepted:
	case err := <-errc:
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestCopySizes(t *testing.T) {
	client, server := pair(t)
	for _, size := range []int{1, 63, 64, 65, 2047, 4096, 65536 + 7, 1 << 20, 3<<20 + 11} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rand.Uint32())
		}
		got := make([]byte, size)
		errc := make(chan error, 1)
		go func() {
			_, err := io.ReadFull(server, got)
			errc <- err
		}()
		if n, err := io.Copy(client, bytes.NewReader(src)); err != nil || n != int64(size) {
			t.Fatalf("size %d: copy %d, %v", size, n, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("size %d: read: %v", size, err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("size %d: data differ", size)
		}
	}
}

// TestEchoBothWays has each side write while the other echoes.
func TestEchoBothWays(t *testing.T) {
	client, server := pair(t)
	go io.Copy(server, server)
	const size = 2 << 20
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := client.Write(src)
		errc <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("echo differs")
	}
}

func TestReadDeadline(t *testing.T) {
	client, _ := pair(t)
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err := client.Read(make([]byte, 10))
	checkTimeout(t, err)
	if d := time.Since(start); d < 40*time.Millisecond || d > 2*time.Second {
		t.Errorf("timed out after %v", d)
	}
	// A deadline in the past fails at once; clearing it lets Read block
	// again (until data comes).
	client.SetReadDeadline(time.Now().Add(-time.Second))
	_, err = client.Read(make([]byte, 10))
	checkTimeout(t, err)
}

// TestDeadlineWhileBlocked moves the deadline of a Read already waiting.
func TestDeadlineWhileBlocked(t *testing.T) {
	client, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	client.SetDeadline(time.Now().Add(20 * time.Millisecond))
	select {
	case err := <-errc:
		checkTimeout(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return")
	}
}

func TestWriteDeadline(t *testing.T) {
	client, _ := pair(t)
	// Nobody reads: the peer's ring and credits run out.
	client.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := client.Write(make([]byte, 8<<20))
	checkTimeout(t, err)
	if n == 0 || n >= 8<<20 {
		t.Errorf("wrote %d before the deadline", n)
	}
}

func checkTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a net.Error timeout wrapping os.ErrDeadlineExceeded", err)
	}
}

func TestCloseWrite(t *testing.T) {
	client, server := pair(t)
	if _, err := client.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, rsocket.ErrShutdown) {
		t.Errorf("Write after CloseWrite: %v", err)
	}
	b, err := io.ReadAll(server)
	if err != nil || string(b) != "last words" {
		t.Fatalf("read %q, %v", b, err)
	}
	// The other direction still works.
	if _, err := server.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(client)
	if err != nil || string(b) != "reply" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// TestCloseInFlight closes right after a large Write: the peer still
// reads every byte, then io.EOF.
func TestCloseInFlight(t *testing.T) {
	client, server := pair(t)
	const size = 256 << 10
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	got := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(server)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	if _, err := client.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, src) {
		t.Fatalf("read %d bytes, want %d equal", len(b), size)
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, rsocket.ErrReset) {
		t.Errorf("Write to a closed peer: %v", err)
	}
}

func TestCloseUnblocks(t *testing.T) {
	client, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	client.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Read after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return")
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
}

// BenchmarkPingPong sends a message and waits for its echo, each side a
// Read and a Write per message: over the in-memory pipe link, over the
// kernel's UDP loopback (the default backend), and, for scale, a TCP
// net.Conn on loopback doing the same.
func BenchmarkPingPong(b *testing.B) {
	for _, link := range []string{"pipe", "udp", "tcp"} {
		for _, size := range []int{64, 4096} {
			b.Run(link+"/"+byteSize(size), func(b *testing.B) {
				var client, server net.Conn
				switch link {
				case "pipe":
					client, server = pair(b)
				case "udp":
					client, server = udpPair(b)
				case "tcp":
					client, server = tcpPair(b)
				}
				pingPong(b, client, server, size)
			})
		}
	}
}

func pingPong(b *testing.B, client, server net.Conn, size int) {
	go func() {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			if _, err := server.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	for b.Loop() {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// udpPair is pair over the kernel UDP backend on 127.0.0.1 and
// 127.0.0.2, sharing a free port.
func udpPair(b *testing.B) (client, server *rsocket.Conn) {
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	port := uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	pc.Close()
	open := func(a string) *verbs.Device {
		l, err := udp.Open(udp.Config{Addr: netip.MustParseAddr(a), Port: port})
		if err != nil {
			b.Fatal(err)
		}
		return verbs.Open(l)
	}
	return connect(b, open("127.0.0.1"), open("127.0.0.2"))
}

func tcpPair(b *testing.B) (client, server net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	if client, err = net.Dial("tcp", l.Addr().String()); err != nil {
		b.Fatal(err)
	}
	server = <-accepted
	b.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func byteSize(n int) string { return fmt.Sprintf("%dB", n) }

// TestRedial opens and closes streams one after another between the same
// devices: each new QP must not collide with one whose connection is
// still in time-wait.
func TestRedial(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	da, db := verbs.Open(la), verbs.Open(lb)
	defer da.Close()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, db, ":7471")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	for i := range 5 {
		c, err := rsocket.Dial(ctx, da, db.Addr().String()+":7471")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		msg := fmt.Sprintf("hello %d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.CloseWrite()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != msg {
			t.Fatalf("echo %d: %q, %v", i, b, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIOWrite maps a buffer on each side and writes into the other's
// directly, a stream message saying when it is done (as riostream's
// marker byte does).
func TestIOWrite(t *testing.T) {
	client, server := pair(t)
	const size = 300 << 10
	sbuf := make([]byte, size)
	if off, err := server.IOMap(sbuf, 0); err != nil || off != 0 {
		t.Fatalf("IOMap: %d, %v", off, err)
	}
	cbuf := make([]byte, 64)
	if off, err := client.IOMap(cbuf, -1); err != nil || off == 0 {
		t.Fatalf("IOMap -1: %d, %v", off, err)
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 13)
	}
	// The first byte of a stream message follows the table entry.
	done := make(chan error, 1)
	go func() {
		var b [4]byte
		_, err := io.ReadFull(server, b[:])
		done <- err
	}()
	if _, err := client.Write([]byte("sync")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := client.IOWrite(src[:size-100], 100); err != nil || n != size-100 {
		t.Fatalf("IOWrite: %d, %v", n, err)
	}
	if n, err := client.IOWrite(src, size-10); !errors.Is(err, rsocket.ErrNotMapped) || n != 10 {
		t.Errorf("IOWrite past the end: %d, %v", n, err)
	}
	if _, err := client.Write([]byte("done")); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if _, err := io.ReadFull(server, b[:]); err != nil || string(b[:]) != "done" {
		t.Fatalf("%q, %v", b, err)
	}
	if !bytes.Equal(sbuf[100:size-10], src[:size-110]) || !bytes.Equal(sbuf[size-10:], src[:10]) {
		t.Error("mapped buffer differs")
	}
	// The server never read the region's bytes as stream data.
	server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := server.Read(b[:]); n != 0 || err == nil {
		t.Errorf("stream had %d more bytes", n)
	}
	if err := server.IOUnmap(sbuf); err != nil {
		t.Error(err)
	}
	if err := server.IOUnmap(sbuf); !errors.Is(err, rsocket.ErrNotMapped) {
		t.Errorf("second IOUnmap: %v", err)
	}
}

// TestDialErrors: nobody listening is a refusal, and a context that
// expires first is a timeout, both net.Errors.
func TestDialErrors(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	da, db := verbs.Open(la), verbs.Open(lb)
	defer da.Close()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, db, ":1") // keeps db's CM answering
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = rsocket.Dial(ctx, da, db.Addr().String()+":7471")
	var ne net.Error
	if !errors.As(err, &ne) || !errors.Is(err, rdmacm.ErrRefused) {
		t.Errorf("dial to no listener: %v", err)
	}
	// A silent peer: the pipe's far end has no device.
	lc, _ := pipe.New(pipe.Config{})
	dc := verbs.Open(lc)
	defer dc.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = rsocket.Dial(short, dc, "10.0.0.2:7471")
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial to a silent peer: %v", err)
	}
}

// TestLossy copies both ways over a pipe that drops, duplicates and
// reorders packets (CM MADs too): RC's retransmission keeps the stream
// whole, and Close still hands over what was in flight.
func TestLossy(t *testing.T) {
	f := netem.Faults{Drop: 0.01, Duplicate: 0.005, Reorder: 0.01}
	la, lb := pipe.New(pipe.Config{Buffers: 4096, Seed: 7, AtoB: f, BtoA: f})
	client, server := connect(t, verbs.Open(la), verbs.Open(lb))
	const size = 256 << 10
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + i>>11)
	}
	go func() {
		io.Copy(server, server)
		server.Close()
	}()
	errc := make(chan error, 1)
	go func() {
		_, err := client.Write(src)
		errc <- errors.Join(err, client.CloseWrite())
	}()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("got %d bytes back, want %d equal", len(got), size)
	}
}

// dropLink drops the first n RC ACKs sent once armed (the ACK of a
// peer's last message lost on the wire), and counts the ACKs it lets
// through after them.
type dropLink struct {
	link.Link
	armed         atomic.Bool
	n             atomic.Int32
	dropped, acks atomic.Int32
}

func (l *dropLink) Send(pkts []*link.Packet) (int, error) {
	keep := pkts[:0:0]
	for _, p := range pkts {
		if l.armed.Load() && p.RoCE()[0] == byte(bth.RCAcknowledge) {
			if l.n.Add(-1) >= 0 {
				l.dropped.Add(1)
				l.Link.Release([]*link.Packet{p})
				continue
			}
			l.acks.Add(1)
		}
		keep = append(keep, p)
	}
	n, err := l.Link.Send(keep)
	return n + len(pkts) - len(keep), err
}

// TestCloseAfterPeer closes the server first, and loses the client's ACK
// of its disconnect message. The client, closing next, keeps answering
// until the server has its ACK and disconnects: the server's message
// completes, and neither Close reports an error. (A QP moved to error at
// once would leave an rxe peer retransmitting forever.)
func TestCloseAfterPeer(t *testing.T) {
	la, lb := pipe.New(pipe.Config{Buffers: 4096})
	dl := &dropLink{Link: la}
	dl.n.Store(1)
	dc, ds := verbs.Open(dl), verbs.Open(lb)
	client, server := connect(t, dc, ds)
	// One message first, so that the stream is settled.
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(server, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	dl.armed.Store(true)
	serr := make(chan error, 1)
	go func() { serr <- server.Close() }()
	// The client reads the disconnect as the stream's end.
	if n, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client Read after the server closed: %d, %v; want io.EOF", n, err)
	}
	if err := client.Close(); err != nil {
		t.Errorf("client Close: %v", err)
	}
	select {
	case err := <-serr:
		if err != nil {
			t.Errorf("server Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server Close did not return")
	}
	if dl.dropped.Load() != 1 {
		t.Fatalf("%d ACKs dropped, want 1", dl.dropped.Load())
	}
	// The server sent its disconnect again and the client, still there,
	// answered it: an rxe peer, whose rsocket disconnects only once
	// its sends are done, would otherwise retransmit forever.
	if dl.acks.Load() == 0 {
		t.Error("the client did not acknowledge the server's disconnect again")
	}
}
