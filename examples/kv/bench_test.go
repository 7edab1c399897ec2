package main

import (
	"context"
	"testing"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/rpc"
)

func benchSetup(b *testing.B) *Client {
	dc, ds, err := loopback.Pair(0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dc.Close(); ds.Close() })
	ds.Start()
	cfg := rpc.Config{Slots: 16, MaxMsg: 4096}
	srv, err := NewServer(ds, Layout{Buckets: 1024, Hood: 8, ValMax: 256}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	cli, err := NewClient(context.Background(), dc, srv.Accept, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	if err := cli.Put(context.Background(), []byte("key"), make([]byte, 256)); err != nil {
		b.Fatal(err)
	}
	return cli
}

// BenchmarkGet is one Get: a READ of a 8-entry neighbourhood (2.5 KiB)
// and its consistency checks.
func BenchmarkGet(b *testing.B) {
	cli := benchSetup(b)
	ctx, key, buf := context.Background(), []byte("key"), make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cli.Get(ctx, key, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut is one Put: an RPC the server applies under the seqlock.
func BenchmarkPut(b *testing.B) {
	cli := benchSetup(b)
	ctx, key, val := context.Background(), []byte("key"), make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if err := cli.Put(ctx, key, val); err != nil {
			b.Fatal(err)
		}
	}
}
