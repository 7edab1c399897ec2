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

// Endpoint is the command line every rdma_cm program here shares: -s, the
// server's address, which puts it in client mode; -b, the address to bind;
// and -timeout.
type Endpoint struct {
	Server  string
	Bind    string
	Timeout time.Duration

	// Listening, for tests, is called once the server listens.
	Listening func()
}

// Flags registers -s, -b and -timeout in fs.
func (e *Endpoint) Flags(fs *flag.FlagSet) {
	fs.StringVar(&e.Server, "s", "", "server `address` (client mode)")
	fs.StringVar(&e.Bind, "b", "", "bind `address`")
	fs.DurationVar(&e.Timeout, "timeout", 0, "give up after this long (0: never)")
}

// Listen calls Listening, if a test set it.
func (e Endpoint) Listen() {
	if e.Listening != nil {
		e.Listening()
	}
}

// CMTest is the command line of librdmacm's cmatose family (cmatose,
// udaddy): an Endpoint, -c connections, and -C messages of -S bytes on
// each.
type CMTest struct {
	Endpoint
	Connections int
	Count       int
	Size        int
}

// Flags registers the Endpoint's flags and -c, -C and -S in fs.
func (o *CMTest) Flags(fs *flag.FlagSet) {
	o.Endpoint.Flags(fs)
	fs.IntVar(&o.Connections, "c", 1, "`connections`")
	fs.IntVar(&o.Count, "C", 10, "message `count` per connection")
	fs.IntVar(&o.Size, "S", 100, "message `size`")
}

// Check refuses what the cmatose family refuses; a size of 0 sends no
// messages, as their create_message makes none.
func (o *CMTest) Check() error {
	switch {
	case o.Connections < 1:
		return fmt.Errorf("bad connections %d", o.Connections)
	case o.Count < 0 || o.Size < 0:
		return fmt.Errorf("bad count %d or size %d", o.Count, o.Size)
	}
	if o.Size == 0 {
		o.Count = 0
	}
	return nil
}

// CMTestExit ends a cmatose-family program with their last lines, on
// standard output whether it failed or not.
func CMTestExit(name string, err error) {
	fmt.Println("test complete")
	if err != nil {
		fmt.Printf("%s: %v\n", name, err)
		fmt.Println("return status 1")
		os.Exit(1)
	}
	fmt.Println("return status 0")
	os.Exit(0)
}

// Echo is the command line of the echo programs (grpc, rsockethttp): an
// Endpoint, the rdma_cm port -p, and -n round trips of -S bytes each.
type Echo struct {
	Endpoint
	Port  int
	Count int
	Size  int
	what  string // what a round trip is called: calls, requests
}

// Flags registers the Endpoint's flags and -p, -n and -S in fs, with the
// program's default port and size; what names a round trip in the help
// and in errors.
func (o *Echo) Flags(fs *flag.FlagSet, port, size int, what string) {
	o.Endpoint.Flags(fs)
	o.what = what
	fs.IntVar(&o.Port, "p", port, "rdma_cm `port`")
	fs.IntVar(&o.Count, "n", 100, "number of `"+what+"`")
	fs.IntVar(&o.Size, "S", size, "message `size`")
}

// Check refuses a count below 1, a negative size and a port out of range.
func (o *Echo) Check() error {
	switch {
	case o.Count < 1 || o.Size < 0:
		return fmt.Errorf("bad %s %d or size %d", o.what, o.Count, o.Size)
	case o.Port < 1 || o.Port > 65535:
		return fmt.Errorf("bad port %d", o.Port)
	}
	return nil
}
