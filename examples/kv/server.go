package main

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/uroce/uroce/examples/internal/rpc"
	"github.com/uroce/uroce/verbs"
	"golang.org/x/sys/unix"
)

// RPC methods and statuses.
const (
	mLayout uint16 = iota + 1
	mPut
	mDelete

	stNotFound = 1
	stFull     = 2
	stBadKey   = 3
)

// Server owns the table. Writes arrive as RPCs and run one at a time on the
// RPC server's goroutine (the single writer a seqlock needs); reads never
// reach it: clients READ the table's region directly.
type Server struct {
	rpc    *rpc.Server
	layout Layout
	table  []byte
	mr     *verbs.MR
}

// NewServer makes the table and serves it on d.
//
// The table is anonymous mmap'd memory, like the DMA-able memory an RNIC
// reads: the engine's READ responder copies from it on the device's
// goroutine while the writer stores into it on another. The race detector
// does not watch memory outside Go's heap, which is right here: that
// concurrency is the point, and the seqlock and CRC are what make it safe.
func NewServer(d *verbs.Device, l Layout, cfg rpc.Config) (*Server, error) {
	table, err := unix.Mmap(-1, 0, l.size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("kv server: %w", err)
	}
	s := &Server{layout: l, table: table}
	// Every entry starts published (version 2, empty), so a reader checks
	// the CRC of every entry it accepts, empty ones included.
	for i := range l.entries() {
		s.entry(i).endWrite(2, nil, nil)
	}
	s.rpc = rpc.NewServer(d, cfg, s.handle)
	if s.mr, err = s.rpc.PD().RegMR(table, verbs.AccessRemoteRead); err != nil {
		s.rpc.Close()
		return nil, fmt.Errorf("kv server: %w", err)
	}
	return s, nil
}

func (s *Server) entry(i int) entry {
	n := s.layout.entrySize()
	return entry(s.table[i*n : (i+1)*n])
}

// Accept connects a client (see rpc.Server.Accept).
func (s *Server) Accept(remote verbs.Endpoint) (verbs.Endpoint, error) { return s.rpc.Accept(remote) }

func (s *Server) handle(method uint16, req, resp []byte) (int, uint16) {
	switch method {
	case mLayout:
		binary.BigEndian.PutUint64(resp[0:], s.mr.Addr())
		binary.BigEndian.PutUint32(resp[8:], s.mr.RKey())
		binary.BigEndian.PutUint32(resp[12:], uint32(s.layout.Buckets))
		binary.BigEndian.PutUint32(resp[16:], uint32(s.layout.Hood))
		binary.BigEndian.PutUint32(resp[20:], uint32(s.layout.ValMax))
		return 24, 0
	case mPut, mDelete:
		// [key length u8][key][value]
		if len(req) < 1 || int(req[0]) == 0 || int(req[0]) > KeyMax || len(req) < 1+int(req[0]) {
			return 0, stBadKey
		}
		key, val := req[1:1+int(req[0])], req[1+int(req[0]):]
		if len(val) > s.layout.ValMax {
			return 0, stBadKey
		}
		return 0, s.write(key, val, method == mDelete)
	}
	return 0, rpc.StatusBadRequest
}

// write puts or deletes key in its neighbourhood. The server is the only
// writer, so it reads its own entries without the seqlock.
func (s *Server) write(key, val []byte, del bool) uint16 {
	b := s.layout.bucket(key)
	free := -1
	for i := b; i < b+s.layout.Hood; i++ {
		e := s.entry(i)
		if bytes.Equal(e.key(), key) {
			if del {
				e.endWrite(e.beginWrite(), nil, nil)
			} else {
				e.endWrite(e.beginWrite(), key, val)
			}
			return 0
		}
		if free < 0 && len(e.key()) == 0 {
			free = i
		}
	}
	if del {
		return stNotFound
	}
	if free < 0 {
		return stFull
	}
	e := s.entry(free)
	e.endWrite(e.beginWrite(), key, val)
	return 0
}

// Close stops serving and unmaps the table.
func (s *Server) Close() error {
	s.rpc.Close()
	s.mr.Dereg()
	return unix.Munmap(s.table)
}
