package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/uroce/uroce/examples/internal/rpc"
	"github.com/uroce/uroce/verbs"
)

// Client reads the table with one RDMA READ per Get and writes it with
// RPCs. It is safe for concurrent use.
type Client struct {
	rpc    *rpc.Client
	layout Layout
	addr   uint64
	rkey   uint32
	bufs   sync.Pool // *[]byte of a neighbourhood, or of a request
	// Retries counts READs repeated because an entry was torn or mid-write.
	retries atomic.Uint64
}

// NewClient connects to a server through accept, the out-of-band exchange
// of endpoints (perftest and rdma_cm use TCP; in one process it is a call
// of Server.Accept), and fetches the table's layout.
func NewClient(ctx context.Context, d *verbs.Device, accept func(verbs.Endpoint) (verbs.Endpoint, error), cfg rpc.Config) (*Client, error) {
	rc, err := rpc.NewClient(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("kv client: %w", err)
	}
	ep, err := accept(rc.Endpoint())
	if err == nil {
		err = rc.Connect(ep)
	}
	var m [24]byte
	if err == nil {
		_, err = rc.Call(ctx, mLayout, nil, m[:])
	}
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("kv client: %w", err)
	}
	c := &Client{rpc: rc, addr: binary.BigEndian.Uint64(m[0:]), rkey: binary.BigEndian.Uint32(m[8:]),
		layout: Layout{Buckets: int(binary.BigEndian.Uint32(m[12:])), Hood: int(binary.BigEndian.Uint32(m[16:])), ValMax: int(binary.BigEndian.Uint32(m[20:]))}}
	n := max(c.layout.Hood*c.layout.entrySize(), 1+KeyMax+c.layout.ValMax)
	c.bufs.New = func() any { b := make([]byte, n); return &b }
	return c, nil
}

// Get copies key's value into dst and returns its length. It reads the
// key's whole neighbourhood with one READ and retries while any entry in it
// is inconsistent (one could hold the key), until ctx ends. It returns
// ErrNotFound, rpc.ErrShortBuffer (dst holds the value's start), ctx's
// error, or an rpc error.
func (c *Client) Get(ctx context.Context, key, dst []byte) (int, error) {
	if len(key) == 0 || len(key) > KeyMax {
		return 0, fmt.Errorf("get: %w", ErrBadKey)
	}
	l := c.layout
	es := l.entrySize()
	pb := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(pb)
	buf := (*pb)[:l.Hood*es]
	raddr := c.addr + uint64(l.bucket(key)*es)
	for {
		if err := c.rpc.Read(ctx, buf, raddr, c.rkey); err != nil {
			return 0, fmt.Errorf("get: %w", err)
		}
		torn := false
		for k := range l.Hood {
			e := entry(buf[k*es : (k+1)*es])
			if !e.consistent() {
				torn = true
				continue
			}
			if bytes.Equal(e.key(), key) {
				v := e.value()
				if n := copy(dst, v); n < len(v) {
					return n, fmt.Errorf("get: %w", rpc.ErrShortBuffer)
				}
				return len(v), nil
			}
		}
		if !torn {
			return 0, fmt.Errorf("get: %w", ErrNotFound)
		}
		c.retries.Add(1)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("get: %w: %w", ErrTorn, err)
		}
	}
}

// Put sets key to value through the server.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	return c.write(ctx, mPut, key, value)
}

// Delete removes key through the server; it returns ErrNotFound if absent.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	return c.write(ctx, mDelete, key, nil)
}

func (c *Client) write(ctx context.Context, m uint16, key, value []byte) error {
	if len(key) == 0 || len(key) > KeyMax || len(value) > c.layout.ValMax {
		return fmt.Errorf("write: %w", ErrBadKey)
	}
	pb := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(pb)
	req := append(append(append((*pb)[:0], byte(len(key))), key...), value...)
	_, err := c.rpc.Call(ctx, m, req, nil)
	if err == nil {
		return nil
	}
	if st := rpc.StatusError(0); errors.As(err, &st) {
		switch st {
		case stNotFound:
			err = ErrNotFound
		case stFull:
			err = ErrFull
		case stBadKey:
			err = ErrBadKey
		}
	}
	return fmt.Errorf("write: %w", err)
}

// Retries returns how many READs were repeated for inconsistent entries.
func (c *Client) Retries() uint64 { return c.retries.Load() }

// Close closes the connection.
func (c *Client) Close() error { return c.rpc.Close() }
