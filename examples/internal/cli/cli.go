// Package cli is the plumbing around the example programs' RDMA steps, so
// that each program's main.go shows those steps and little else: the exit
// statuses for a command line that is refused or asks for help, the
// context that an interrupt or a time limit ends, and printing the error
// a run ends with.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// printedError is an error the flag package has printed already, with the
// usage.
type printedError struct{ error }

func (e printedError) Unwrap() error { return e.error }

// Parse is fs.Parse for a flag set that prints its own errors
// (flag.ContinueOnError with an output): it marks what it returns as
// printed, so that BadUsage does not print it twice.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return printedError{err}
	}
	return nil
}

// BadUsage ends a program whose command line was refused: with status 0
// when it asked for help (-h, whose usage the flag package printed), else
// with status 2, after printing "name: err" to stderr unless Parse says
// the flag package printed err already.
func BadUsage(name string, err error) {
	os.Exit(badUsage(name, err, os.Stderr))
}

func badUsage(name string, err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if !errors.As(err, new(printedError)) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return 2
}

// Context returns a context that SIGINT and SIGTERM cancel and that, with
// limit positive, ends after limit.
func Context(limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if limit <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	return ctx, func() { cancel(); stop() }
}

// Run runs run with Context(limit) and ends the program: with status 0
// when run returns nil, else with status 1 after printing "name: err" to
// stderr.
func Run(name string, limit time.Duration, run func(ctx context.Context) error) {
	ctx, cancel := Context(limit)
	err := run(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}
