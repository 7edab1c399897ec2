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

// TestLoopback serves and calls over a loopback pair (no root): every
// message comes back whole at 64 B, 4 KiB and 64 KiB.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ calls, size int }{{50, 64}, {50, 4 << 10}, {20, 64 << 10}} {
		t.Run(fmt.Sprintf("n%d-S%d", tc.calls, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sctx, stop := context.WithCancel(ctx)
			o := options{Port: 7472, Count: tc.calls, Size: tc.size}
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
			if want := fmt.Sprintf("%d calls of %d bytes echoed", tc.calls, tc.size); !strings.Contains(cliOut, want) {
				t.Errorf("client printed:\n%s", cliOut)
			}
			t.Log(strings.TrimSpace(cliOut))
		})
	}
}
