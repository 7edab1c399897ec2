package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestBadUsage(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("n", 1, "")
	help := Parse(fs, []string{"-h"})
	syntax := Parse(fs, []string{"-n", "x"})
	for _, tc := range []struct {
		err    error
		status int
		stderr string
	}{
		{help, 0, ""},
		{syntax, 2, ""}, // the flag package printed it
		{errors.New("bad size 0"), 2, "prog: bad size 0\n"},
	} {
		var b strings.Builder
		if s := badUsage("prog", tc.err, &b); s != tc.status || b.String() != tc.stderr {
			t.Errorf("%v: status %d, printed %q; want %d, %q", tc.err, s, b.String(), tc.status, tc.stderr)
		}
	}
	if !errors.Is(help, flag.ErrHelp) {
		t.Error("Parse hides flag.ErrHelp")
	}
	if err := Parse(fs, []string{"-n", "3"}); err != nil {
		t.Error(err)
	}
}

func TestContext(t *testing.T) {
	ctx, cancel := Context(0)
	if _, ok := ctx.Deadline(); ok {
		t.Error("deadline without a limit")
	}
	cancel()
	if ctx.Err() == nil {
		t.Error("cancel does not end the context")
	}
	ctx, cancel = Context(time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("after the limit: %v", ctx.Err())
	}
}

func TestEcho(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{}, true},
		{[]string{"-s", "10.0.0.1", "-n", "5", "-S", "10", "-timeout", "1s"}, true},
		{[]string{"-n", "0"}, false},
		{[]string{"-S", "-1"}, false},
		{[]string{"-p", "70000"}, false},
	} {
		var o Echo
		fs := flag.NewFlagSet("echo", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.Flags(fs, 7472, 64, "calls")
		err := Parse(fs, tc.args)
		if err == nil {
			err = o.Check()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}
