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

// TestLoopback serves and fetches over a loopback pair (no root): every
// body comes back whole, from 0 bytes to 1 MiB.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ requests, size int }{{20, 0}, {50, 100}, {10, 64 << 10}, {3, 1 << 20}} {
		t.Run(fmt.Sprintf("n%d-S%d", tc.requests, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sctx, stop := context.WithCancel(ctx)
			o := options{port: 8080, requests: tc.requests, size: tc.size}
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
			if want := fmt.Sprintf("%d requests of %d bytes echoed", tc.requests, tc.size); !strings.Contains(cliOut.String(), want) {
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
