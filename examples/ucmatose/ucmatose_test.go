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

// TestLoopback runs the server and the client against each other over the
// kernel's loopback (no root): every connection comes up, every message
// and reply is received, and both end after the server's disconnect.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ connections, count, size int }{{1, 10, 100}, {3, 5, 4096}, {2, 0, 0}} {
		t.Run(fmt.Sprintf("c%d-C%d-S%d", tc.connections, tc.count, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := options{port: 7471, connections: tc.connections, count: tc.count, size: tc.size}
			var srvOut, cliOut strings.Builder
			serr, cerr := loopback.Run(ctx, func(d *verbs.Device, listening func()) error {
				srv := o
				srv.listening = listening
				return run(ctx, d, srv, &srvOut)
			}, func(d *verbs.Device) error {
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
			want := "cmatose: disconnecting\ndisconnected\n"
			if tc.count > 0 {
				want = "data transfers complete\n" + want
			}
			if !strings.HasSuffix(srvOut.String(), want) {
				t.Errorf("server printed:\n%s", srvOut.String())
			}
			if tc.count > 0 && !strings.HasSuffix(cliOut.String(), "sending replies\ndata transfers complete\n") {
				t.Errorf("client printed:\n%s", cliOut.String())
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{}, true},
		{[]string{"-s", "10.0.0.1", "-C", "5", "-S", "10", "-c", "2"}, true},
		{[]string{"-c", "0"}, false},
		{[]string{"-C", "-1"}, false},
		{[]string{"-p", "70000"}, false},
	} {
		if _, err := parseFlags(tc.args, &strings.Builder{}); (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}
