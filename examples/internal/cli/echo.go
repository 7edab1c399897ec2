package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/verbs"
)

// EchoProgram is a whole echo program over rsocket streams (grpc,
// rsockethttp): its name, its defaults, and its two halves.
type EchoProgram struct {
	Name string
	Port int    // default -p
	Size int    // default -S
	What string // what a round trip is called: calls, requests

	// Serve serves until ctx ends; Call makes o.Count round trips
	// and prints their times.
	Serve, Call func(ctx context.Context, d *verbs.Device, o Echo, out io.Writer) error
}

// Parse reads the program's command line.
func (p EchoProgram) Parse(args []string, errOut io.Writer) (Echo, error) {
	var o Echo
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.Flags(fs, p.Port, p.Size, p.What)
	if err := Parse(fs, args); err != nil {
		return o, err
	}
	return o, o.Check()
}

// Run is the whole program once the device is open: the server without
// -s, the client with it. It closes d.
func (p EchoProgram) Run(ctx context.Context, d *verbs.Device, o Echo, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	if o.Server == "" {
		return p.Serve(ctx, d, o, out)
	}
	return p.Call(ctx, d, o, out)
}

// Main parses the command line, opens the device and runs the program;
// a failure exits with status 1.
func (p EchoProgram) Main() {
	o, err := p.Parse(os.Args[1:], os.Stderr)
	if err != nil {
		BadUsage(p.Name, err)
	}
	ctx, cancel := Context(o.Timeout)
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = p.Run(ctx, d, o, os.Stdout)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Name, err)
		os.Exit(1)
	}
}
