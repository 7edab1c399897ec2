package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/streamcli"
	"github.com/uroce/uroce/verbs"
)

// TestLoopback runs the server and the client against each other over the
// kernel's loopback (no root), verifying the data.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ size, count, iterations int }{{1000, 100, 1}, {64, 50, 3}, {1 << 20, 4, 2}, {2, 10, 2}} {
		t.Run(fmt.Sprintf("S%d-C%d-I%d", tc.size, tc.count, tc.iterations), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := streamcli.Options{Port: 7471, Size: tc.size, Count: tc.count, Iterations: tc.iterations, Verify: true}
			var srvOut, cliOut strings.Builder
			serr, cerr := loopback.Run(ctx, func(d *verbs.Device, listening func()) error {
				srv := o
				srv.Listening = listening
				return run(ctx, d, srv, &srvOut)
			}, func(d *verbs.Device) error {
				cli := o
				cli.Server = loopback.B.String()
				return run(ctx, d, cli, &cliOut)
			})
			if cerr != nil {
				t.Fatalf("client: %v\n%s", cerr, cliOut.String())
			}
			if serr != nil {
				t.Fatalf("server: %v\n%s", serr, srvOut.String())
			}
			for _, out := range []string{srvOut.String(), cliOut.String()} {
				if !strings.Contains(out, "\ncustom    "+streamcli.SizeStr(int64(tc.size))) {
					t.Errorf("printed:\n%s", out)
				}
			}
			t.Logf("client:\n%s", cliOut.String())
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{}, true},
		{[]string{"-s", "10.0.0.1", "-S", "64", "-C", "10", "-I", "2", "-T", "v"}, true},
		{[]string{"-T", "b"}, true},
		{[]string{"-T", "x"}, false},
		{[]string{"-S", "1"}, false},
		{[]string{"-p", "0"}, false},
	} {
		_, err := streamcli.Parse("riostream", 2, tc.args, &strings.Builder{})
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}

func TestSizeStr(t *testing.T) {
	for n, want := range map[int64]string{64: "64", 1000: "1000", 1536: "1.5k", 4096: "4k", 3 << 20: "3m", 12345678: "11m"} {
		if got := streamcli.SizeStr(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
