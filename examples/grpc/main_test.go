package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
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
			o := options{port: 7472, calls: tc.calls, size: tc.size}
			var srvOut, cliOut strings.Builder
			serr, cerr := loopback.Run(ctx, func(d *verbs.Device, listening func()) error {
				srv := o
				srv.listening = listening
				return run(sctx, d, srv, &srvOut)
			}, func(d *verbs.Device) error {
				defer stop() // the server ends once the client is done
				cli := o
				cli.server = loopback.B.String()
				return run(ctx, d, cli, &cliOut)
			})
			if cerr != nil {
				t.Fatalf("client: %v\n%s", cerr, cliOut.String())
			}
			if serr != nil {
				t.Fatalf("server: %v\n%s", serr, srvOut.String())
			}
			if want := fmt.Sprintf("%d calls of %d bytes echoed", tc.calls, tc.size); !strings.Contains(cliOut.String(), want) {
				t.Errorf("client printed:\n%s", cliOut.String())
			}
			t.Log(strings.TrimSpace(cliOut.String()))
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{}, true},
		{[]string{"-s", "10.0.0.1", "-n", "5", "-S", "10"}, true},
		{[]string{"-n", "0"}, false},
		{[]string{"-p", "70000"}, false},
	} {
		_, err := parseFlags(tc.args, &strings.Builder{})
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}
