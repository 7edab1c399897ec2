// Command kv is a remote key-value table read with one-sided RDMA READs and
// written through RPCs, on two loopback devices with the kernel UDP backend
// (no root needed). See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/examples/internal/rpc"
)

func main() {
	port := flag.Uint("port", 0, loopback.PortUsage)
	keys := flag.Int("keys", 200, "keys to write")
	dur := flag.Duration("d", 2*time.Second, "how long writers and readers race")
	metricsAddr := flag.String("metrics", "", metricsflag.Usage)
	flag.Parse()
	if err := run(uint16(*port), *keys, *dur, *metricsAddr); err != nil {
		log.Fatal(err)
	}
}

func run(port uint16, keys int, dur time.Duration, metricsAddr string) error {
	dc, ds, closeAll, err := loopback.Open(port, metricsAddr, os.Stdout)
	if err != nil {
		return err
	}
	defer closeAll()
	// The server's engine runs on its own goroutine, so READs are served
	// while the RPC goroutine writes: the server's CPU is off the read path.
	ds.Start()
	cfg := rpc.Config{Slots: 32, MaxMsg: 4096}
	srv, err := NewServer(ds, Layout{Buckets: 1024, Hood: 8, ValMax: 256}, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := context.Background()
	cli, err := NewClient(ctx, dc, srv.Accept, cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	for k := range keys {
		if err := cli.Put(ctx, fmt.Appendf(nil, "key-%d", k), fmt.Appendf(nil, "value-%d-0", k)); err != nil {
			return err
		}
	}
	val := make([]byte, 256)
	n, err := cli.Get(ctx, []byte("key-7"), val)
	if err != nil {
		return err
	}
	fmt.Printf("key-7 = %q\n", val[:n])

	// Writers bump every key's counter while readers Get; each value a
	// reader sees must be one a writer wrote.
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	var gets, puts [4]int
	for w := range 2 {
		wg.Go(func() {
			for seq := 1; ctx.Err() == nil; seq++ {
				k := (seq*2 + w) % keys
				if cli.Put(ctx, fmt.Appendf(nil, "key-%d", k), fmt.Appendf(nil, "value-%d-%d", k, seq)) == nil {
					puts[w]++
				}
			}
		})
	}
	for r := range 4 {
		wg.Go(func() {
			buf := make([]byte, 256)
			for i := 0; ctx.Err() == nil; i++ {
				k := (i*7 + r) % keys
				n, err := cli.Get(ctx, fmt.Appendf(nil, "key-%d", k), buf)
				if err != nil {
					continue
				}
				var kk, seq int
				if _, err := fmt.Sscanf(string(buf[:n]), "value-%d-%d", &kk, &seq); err != nil || kk != k {
					fmt.Fprintf(os.Stderr, "bad value for key-%d: %q\n", k, buf[:n])
					os.Exit(1)
				}
				gets[r]++
			}
		})
	}
	wg.Wait()
	fmt.Printf("%v: %d READ-side gets, %d RPC puts, %d READs retried for torn or mid-write entries\n",
		dur, gets[0]+gets[1]+gets[2]+gets[3], puts[0]+puts[1], cli.Retries())
	return nil
}
