package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/progtest"
)

// TestLoopback runs the server and the client against each other over the
// kernel's loopback (no root): every connection comes up, every message
// and reply is received, and both end after the server's disconnect.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ connections, count, size int }{{1, 10, 100}, {3, 5, 4096}, {2, 0, 0}} {
		t.Run(fmt.Sprintf("c%d-C%d-S%d", tc.connections, tc.count, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := options{port: 7471, CMTest: cli.CMTest{Connections: tc.connections, Count: tc.count, Size: tc.size}}
			srvOut, cliOut := progtest.Program(t, ctx, o, endpoint, run)
			want := "cmatose: disconnecting\ndisconnected\n"
			if tc.count > 0 {
				want = "data transfers complete\n" + want
			}
			if !strings.HasSuffix(srvOut, want) {
				t.Errorf("server printed:\n%s", srvOut)
			}
			if tc.count > 0 && !strings.HasSuffix(cliOut, "sending replies\ndata transfers complete\n") {
				t.Errorf("client printed:\n%s", cliOut)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	progtest.CheckFlags(t, func(args []string, errOut io.Writer) error {
		_, err := parseFlags(args, errOut)
		return err
	}, [][]string{
		{},
		{"-s", "10.0.0.1", "-C", "5", "-S", "10", "-c", "2"},
	}, [][]string{
		{"-c", "0"},
		{"-C", "-1"},
		{"-p", "70000"},
	})
}

func endpoint(o *options) *cli.Endpoint { return &o.Endpoint }
