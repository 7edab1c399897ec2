package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
)

// The same echo RPC over one kernel TCP connection, for comparison: frames
// of [length u32][id u32][method or status u16][pad u16][body], many
// requests in flight, replies matched by ID as in the RDMA version.

func serveTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r, w := bufio.NewReader(c), bufio.NewWriter(c)
			var hdr [12]byte
			body := make([]byte, 1<<20)
			for {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return
				}
				n := binary.BigEndian.Uint32(hdr[:])
				if _, err := io.ReadFull(r, body[:n]); err != nil {
					return
				}
				w.Write(hdr[:])
				w.Write(body[:n])
				if r.Buffered() == 0 { // flush when no request is queued
					if w.Flush() != nil {
						return
					}
				}
			}
		}()
	}
}

type tcpClient struct {
	c     net.Conn
	wmu   sync.Mutex
	w     *bufio.Writer
	mu    sync.Mutex
	calls map[uint32]*pending
	next  uint32
}

// pending is one caller's call in flight; callers reuse theirs.
type pending struct {
	buf  []byte
	done chan int
}

func dialTCP(addr string) (*tcpClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &tcpClient{c: c, w: bufio.NewWriter(c), calls: make(map[uint32]*pending)}
	go t.read()
	return t, nil
}

func (t *tcpClient) read() {
	r := bufio.NewReader(t.c)
	var hdr [12]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		t.mu.Lock()
		p := t.calls[binary.BigEndian.Uint32(hdr[4:])]
		t.mu.Unlock()
		if _, err := io.ReadFull(r, p.buf[:n]); err != nil {
			return
		}
		p.done <- int(n)
	}
}

// call sends req and waits for its echo into p.buf.
func (t *tcpClient) call(p *pending, req []byte) int {
	t.mu.Lock()
	t.next++
	id := t.next
	t.calls[id] = p
	t.mu.Unlock()
	var hdr [12]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(req)))
	binary.BigEndian.PutUint32(hdr[4:], id)
	t.wmu.Lock()
	t.w.Write(hdr[:])
	t.w.Write(req)
	t.w.Flush()
	t.wmu.Unlock()
	n := <-p.done
	t.mu.Lock()
	delete(t.calls, id)
	t.mu.Unlock()
	return n
}
