package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/progtest"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// TestLoopback runs the server and the client against each other over the
// kernel's loopback (no root): every service resolves, every datagram
// and reply arrives, and both print udaddy's closing lines.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct{ connections, count, size int }{{1, 10, 100}, {3, 5, 1024}, {2, 0, 0}} {
		t.Run(fmt.Sprintf("c%d-C%d-S%d", tc.connections, tc.count, tc.size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := options{CMTest: cli.CMTest{Connections: tc.connections, Count: tc.count, Size: tc.size}, tos: -1}
			srvOut, cliOut := progtest.Program(t, ctx, o, endpoint, run)
			srvWant, cliWant := "udaddy: starting server\n", "udaddy: starting client\nudaddy: connecting\n"
			if tc.count > 0 {
				srvWant += "receiving data transfers\nsending replies\ndata transfers complete\n"
				cliWant += "initiating data transfers\nreceiving data transfers\ndata transfers complete\n"
			}
			if srvOut != srvWant {
				t.Errorf("server printed:\n%s", srvOut)
			}
			if cliOut != cliWant {
				t.Errorf("client printed:\n%s", cliOut)
			}
		})
	}
}

// TestNoServer: a client with nobody listening ends at once with the
// refusal (SIDR_REP "service ID not supported").
func TestNoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv, err := rdmacmOpen(b)
	if err != nil {
		t.Fatal(err)
	}
	defer srv()
	var out strings.Builder
	err = run(ctx, a, options{CMTest: cli.CMTest{Endpoint: cli.Endpoint{Server: loopback.B.String()}, Connections: 1, Count: 1, Size: 10}, tos: -1}, &out)
	if err == nil || !strings.Contains(err.Error(), "service ID not supported") {
		t.Errorf("got %v\n%s", err, out.String())
	}
}

func TestParseFlags(t *testing.T) {
	progtest.CheckFlags(t, func(args []string, errOut io.Writer) error {
		_, err := parseFlags(args, errOut)
		return err
	}, [][]string{
		{},
		{"-s", "10.0.0.1", "-C", "5", "-S", "10", "-c", "2", "-t", "0x20"},
		{"-P", "udp", "-p", "0x111", "-f", "ip"},
	}, [][]string{
		{"-P", "ipoib"},
		{"-p", "0x2"},
		{"-f", "gid"},
		{"-c", "0"},
		{"-C", "-1"},
		{"-t", "300"},
	})
	if o, _ := parseFlags([]string{"-S", "0"}, &strings.Builder{}); o.Count != 0 {
		t.Errorf("-S 0 leaves count %d", o.Count)
	}
}

// rdmacmOpen opens a CM on d that listens on nothing.
func rdmacmOpen(d *verbs.Device) (func(), error) {
	m, err := rdmacm.Open(d, rdmacm.Config{})
	if err != nil {
		d.Close()
		return nil, err
	}
	return func() {
		m.Close()
		d.Close()
	}, nil
}

func endpoint(o *options) *cli.Endpoint { return &o.Endpoint }
