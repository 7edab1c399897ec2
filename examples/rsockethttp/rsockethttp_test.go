package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/progtest"
	"github.com/uroce/uroce/verbs"
)

// TestLoopback serves and fetches over a loopback pair (no root): every
// body comes back whole, from 0 bytes to 1 MiB.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ requests, size int }{{20, 0}, {50, 100}, {10, 64 << 10}, {3, 1 << 20}} {
		t.Run(fmt.Sprintf("n%d-S%d", tc.requests, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sctx, stop := context.WithCancel(ctx)
			o := options{Port: 8080, Count: tc.requests, Size: tc.size}
			_, cliOut := progtest.Run(t, ctx, func(d *verbs.Device, listening func(), out io.Writer) error {
				srv := o
				srv.Listening = listening
				return run(sctx, d, srv, out)
			}, func(d *verbs.Device, server string, out io.Writer) error {
				defer stop() // the server ends once the client is done
				c := o
				c.Server = server
				return run(ctx, d, c, out)
			})
			if want := fmt.Sprintf("%d requests of %d bytes echoed", tc.requests, tc.size); !strings.Contains(cliOut, want) {
				t.Errorf("client printed:\n%s", cliOut)
			}
			t.Log(strings.TrimSpace(cliOut))
		})
	}
}
