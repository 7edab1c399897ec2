package main

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestDrivingConnIdleAllocs waits in drivingConn.Read well past quietIdle,
// as a side does while its peer computes a long report (send_bw's server
// takes minutes over perftest's peak at a few hundred thousand
// iterations), and checks that the wait allocates nothing per turn: what
// it allocated per millisecond showed in bench as allocations per
// operation.
func TestDrivingConnIdleAllocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(peer)
			return
		}
		peer <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, ok := <-peer
	if !ok {
		t.Fatal("accept failed")
	}
	defer p.Close()
	d, err := newDrivingConn(c)
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	d.drive = func() { turns++ }
	d.rx = func() uint64 { return 0 }
	const wait = quietIdle + 300*time.Millisecond
	go func() {
		time.Sleep(wait)
		p.Write([]byte{1})
	}()
	var buf [1]byte
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	n, err := d.Read(buf[:])
	runtime.ReadMemStats(&m1)
	if n != 1 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	// The sleeper goroutine's timer and the first turns may allocate a
	// few objects; a wait that allocated per millisecond makes hundreds.
	if a := m1.Mallocs - m0.Mallocs; a > 20 {
		t.Errorf("%d allocations in a %v wait (%d engine turns)", a, wait, turns)
	}
}
