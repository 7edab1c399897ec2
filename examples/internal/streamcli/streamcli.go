// Package streamcli is what rdma-core's rstream and riostream share, and
// so what examples/rstream and examples/riostream share: their flags, the
// one stream they open, and the result line they print (librdmacm's
// examples/common.c and the two programs' main and show_perf).
package streamcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

// Options are the flags both programs take, in their custom mode (-S).
type Options struct {
	cli.Endpoint
	Port       int
	Size       int
	Count      int
	Iterations int
	Verify     bool
}

// Parse reads name's flags from args; a transfer is at least minSize
// bytes.
func Parse(name string, minSize int, args []string, errOut io.Writer) (Options, error) {
	var o Options
	var tests string
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.Endpoint.Flags(fs)
	fs.IntVar(&o.Port, "p", 7471, "`port`")
	fs.IntVar(&o.Size, "S", 1000, "transfer `size`")
	fs.IntVar(&o.Count, "C", 1000, "transfer `count` per iteration")
	fs.IntVar(&o.Iterations, "I", 1, "`iterations`")
	fs.StringVar(&tests, "T", "", "test `options`: v verify; b, n accepted")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	for _, t := range strings.Split(tests, ",") {
		switch t {
		case "":
		case "v", "verify":
			o.Verify = true
		case "b", "block", "n", "nonblock":
		default:
			return o, fmt.Errorf("unknown test option %q", t)
		}
	}
	switch {
	case o.Size < minSize || o.Count < 1 || o.Iterations < 1:
		return o, fmt.Errorf("bad size %d, count %d or iterations %d", o.Size, o.Count, o.Iterations)
	case o.Port < 1 || o.Port > 65535:
		return o, fmt.Errorf("bad port %d", o.Port)
	}
	return o, nil
}

// Main is a whole program: it parses name's flags, opens the device and
// runs run, which closes it; a failure exits with status 1.
func Main(name string, minSize int, run func(ctx context.Context, d *verbs.Device, o Options, out io.Writer) error) {
	o, err := Parse(name, minSize, os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage(name, err)
	}
	ctx, cancel := cli.Context(o.Timeout)
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Connect opens the stream: the server listens on o.Port and takes one
// connection, the client dials o.Server; either prints the header first.
// ctx's deadline, and its end, end a blocked Read or Write too; stop
// releases that watch.
func Connect(ctx context.Context, d *verbs.Device, o Options, out io.Writer) (c *rsocket.Conn, stop func() bool, err error) {
	if o.Server == "" {
		l, err := rsocket.Listen(ctx, d, fmt.Sprintf(":%d", o.Port))
		if err != nil {
			return nil, nil, err
		}
		PrintHeader(out)
		o.Listen()
		stop := context.AfterFunc(ctx, func() { l.Close() })
		c, err = l.AcceptRsocket()
		stop()
		l.Close()
		if err != nil {
			return nil, nil, err
		}
	} else {
		PrintHeader(out)
		if c, err = rsocket.Dial(ctx, d, fmt.Sprintf("%s:%d", o.Server, o.Port)); err != nil {
			return nil, nil, err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	return c, context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) }), nil
}

// PrintHeader prints the programs' column heads.
func PrintHeader(out io.Writer) {
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
		"name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
}

// Report prints show_perf's line for a run of d: bytes both ways, the
// rate, and the time per transfer.
func Report(out io.Writer, o Options, d time.Duration) {
	usec := max(float64(d.Microseconds()), 1)
	bytes := int64(o.Iterations) * int64(o.Count) * int64(o.Size) * 2
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", "custom",
		SizeStr(int64(o.Size)), cntStr(int64(o.Count)), cntStr(int64(o.Iterations)), SizeStr(bytes),
		usec/1e6, float64(bytes*8)/(1000*usec), usec/float64(o.Iterations)/float64(o.Count*2))
}

// SizeStr is common.c's size_str.
func SizeStr(n int64) string {
	base, mag := int64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if frac := (n % base) * 10 / base; n/base < 10 && frac != 0 {
		return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// cntStr is common.c's cnt_str.
func cntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return fmt.Sprint(n)
}
