// Package progtest runs the example programs in their own tests: a
// program's server and client against each other over a loopback pair,
// and a program's flag parser over a table of command lines.
package progtest

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/streamcli"
	"github.com/uroce/uroce/verbs"
)

// Run runs server and client with loopback.Run, each printing into its
// own buffer, and returns what each printed. The client is given the
// server's address. An error from either side ends t at once, with what
// that side printed.
func Run(t testing.TB, ctx context.Context,
	server func(d *verbs.Device, listening func(), out io.Writer) error,
	client func(d *verbs.Device, server string, out io.Writer) error) (srvOut, cliOut string) {
	t.Helper()
	var srv, cli strings.Builder
	serr, cerr := loopback.Run(ctx, func(d *verbs.Device, listening func()) error {
		return server(d, listening, &srv)
	}, func(d *verbs.Device) error {
		return client(d, loopback.B.String(), &cli)
	})
	if cerr != nil {
		t.Fatalf("client: %v\n%s", cerr, cli.String())
	}
	if serr != nil {
		t.Fatalf("server: %v\n%s", serr, srv.String())
	}
	return srv.String(), cli.String()
}

// Program runs a program's run as its server and as its client, from the
// same options o (ep gives their Endpoint): the server's get Listening,
// the client's the server's address. It returns what each printed.
func Program[O any](t testing.TB, ctx context.Context, o O, ep func(*O) *cli.Endpoint, run func(ctx context.Context, d *verbs.Device, o O, out io.Writer) error) (srvOut, cliOut string) {
	t.Helper()
	return Run(t, ctx, func(d *verbs.Device, listening func(), out io.Writer) error {
		srv := o
		ep(&srv).Listening = listening
		return run(ctx, d, srv, out)
	}, func(d *verbs.Device, server string, out io.Writer) error {
		c := o
		ep(&c).Server = server
		return run(ctx, d, c, out)
	})
}

// CheckFlags runs parse over command lines: each in accepted must parse,
// each in refused must fail.
func CheckFlags(t testing.TB, parse func(args []string, errOut io.Writer) error, accepted, refused [][]string) {
	t.Helper()
	for _, args := range accepted {
		if err := parse(args, io.Discard); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
	for _, args := range refused {
		if parse(args, io.Discard) == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// Stream runs an rstream-like program (name, its smallest size and its
// run) over loopback for each case, and checks that both ends verified
// the data and printed their report line; then it checks the program's
// flags, common to every such program, with minSize in force.
func Stream(t *testing.T, name string, minSize int, run func(ctx context.Context, d *verbs.Device, o streamcli.Options, out io.Writer) error, cases []StreamCase) {
	for _, tc := range cases {
		t.Run(fmt.Sprintf("S%d-C%d-I%d", tc.Size, tc.Count, tc.Iterations), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := streamcli.Options{Port: 7471, Size: tc.Size, Count: tc.Count, Iterations: tc.Iterations, Verify: true}
			srvOut, cliOut := Program(t, ctx, o, func(o *streamcli.Options) *cli.Endpoint { return &o.Endpoint }, run)
			for _, out := range []string{srvOut, cliOut} {
				if !strings.Contains(out, "\ncustom    "+streamcli.SizeStr(int64(tc.Size))) {
					t.Errorf("printed:\n%s", out)
				}
			}
			t.Logf("client:\n%s", cliOut)
		})
	}
	CheckFlags(t, func(args []string, errOut io.Writer) error {
		_, err := streamcli.Parse(name, minSize, args, errOut)
		return err
	}, [][]string{
		{},
		{"-s", "10.0.0.1", "-S", "64", "-C", "10", "-I", "2", "-T", "v"},
		{"-T", "b"},
	}, [][]string{
		{"-T", "x"},
		{"-S", strconv.Itoa(minSize - 1)},
		{"-p", "0"},
	})
}

// StreamCase is one run of a stream program: Count transfers of Size
// bytes each way, Iterations times.
type StreamCase struct{ Size, Count, Iterations int }

// Echo runs an echo program (grpc, rsockethttp) over loopback, one run per
// case of Count round trips of Size bytes, and checks that the client
// reports them all echoed. The server ends once the client is done.
func Echo(t *testing.T, p cli.EchoProgram, cases []cli.Echo) {
	for _, tc := range cases {
		t.Run(fmt.Sprintf("n%d-S%d", tc.Count, tc.Size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sctx, stop := context.WithCancel(ctx)
			o := tc
			o.Port = p.Port
			_, cliOut := Run(t, ctx, func(d *verbs.Device, listening func(), out io.Writer) error {
				srv := o
				srv.Listening = listening
				return p.Run(sctx, d, srv, out)
			}, func(d *verbs.Device, server string, out io.Writer) error {
				defer stop()
				c := o
				c.Server = server
				return p.Run(ctx, d, c, out)
			})
			if want := fmt.Sprintf("%d %s of %d bytes echoed", tc.Count, p.What, tc.Size); !strings.Contains(cliOut, want) {
				t.Errorf("client printed:\n%s", cliOut)
			}
			t.Log(strings.TrimSpace(cliOut))
		})
	}
}
