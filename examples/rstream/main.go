package main

import (
	"context"
	"errors"
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

type options struct {
	server     string // -s: the server's address; empty on the server
	bind       string // -b
	port       int
	size       int
	count      int
	iterations int
	verify     bool
	timeout    time.Duration

	// For tests: called once the server listens.
	listening func()
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	var tests string
	fs := flag.NewFlagSet("rstream", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.server, "s", "", "server `address` (client mode)")
	fs.StringVar(&o.bind, "b", "", "bind `address`")
	fs.IntVar(&o.port, "p", 7471, "`port`")
	fs.IntVar(&o.size, "S", 1000, "transfer `size`")
	fs.IntVar(&o.count, "C", 1000, "transfer `count` per iteration")
	fs.IntVar(&o.iterations, "I", 1, "`iterations`")
	fs.StringVar(&tests, "T", "", "test `options`: v verify; b, n accepted")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (uroce only; 0: never)")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	for _, t := range strings.Split(tests, ",") {
		switch t {
		case "":
		case "v", "verify":
			o.verify = true
		case "b", "block", "n", "nonblock":
		default:
			return o, fmt.Errorf("unknown test option %q", t)
		}
	}
	switch {
	case o.size < 1 || o.count < 1 || o.iterations < 1:
		return o, fmt.Errorf("bad size %d, count %d or iterations %d", o.size, o.count, o.iterations)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("rstream", err)
	}
	ctx, cancel := cli.Context(o.timeout)
	d, err := openDevice(o)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rstream:", err)
		os.Exit(1)
	}
}

// run is the whole program once the device is open. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	var c *rsocket.Conn
	if o.server == "" {
		l, err := rsocket.Listen(ctx, d, fmt.Sprintf(":%d", o.port))
		if err != nil {
			return err
		}
		printHeader(out)
		if o.listening != nil {
			o.listening()
		}
		stop := context.AfterFunc(ctx, func() { l.Close() })
		c, err = l.AcceptRsocket()
		stop()
		l.Close()
		if err != nil {
			return err
		}
	} else {
		printHeader(out)
		if c, err = rsocket.Dial(ctx, d, fmt.Sprintf("%s:%d", o.server, o.port)); err != nil {
			return err
		}
	}
	// The time limit ends a blocked Read or Write too.
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	t := tester{c: c, o: o, buf: make([]byte, o.size)}
	err = t.run(out)
	return errors.Join(err, c.Close())
}

func printHeader(out io.Writer) {
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
		"name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
}

// tester is rstream's run_test for one stream.
type tester struct {
	c        *rsocket.Conn
	o        options
	buf      []byte
	sendData byte  // format_buf's running byte
	recvData byte  // verify_buf's running byte
	received int64 // verify_buf's byte count, for its message
}

func (t *tester) run(out io.Writer) error {
	client := t.o.server != ""
	// sync_test: 16 bytes from the client, 16 back.
	if err := t.step(client, 16); err != nil {
		return err
	}
	if err := t.step(!client, 16); err != nil {
		return err
	}
	start := time.Now()
	for range t.o.iterations {
		for _, sending := range []bool{client, !client} {
			for range t.o.count {
				if err := t.step(sending, t.o.size); err != nil {
					return err
				}
			}
		}
	}
	t.report(out, time.Since(start))
	return nil
}

// step is send_xfer or recv_xfer.
func (t *tester) step(send bool, size int) error {
	b := t.buf[:size]
	if send {
		if t.o.verify {
			for i := range b {
				b[i] = t.sendData
				t.sendData++
			}
		}
		_, err := t.c.Write(b)
		return err
	}
	if _, err := io.ReadFull(t.c, b); err != nil {
		return err
	}
	if t.o.verify {
		for i := range b {
			if b[i] != t.recvData {
				return fmt.Errorf("data verification failed byte %d", t.received)
			}
			t.recvData++
			t.received++
		}
	}
	return nil
}

// report prints show_perf's line: bytes both ways, the rate, and the
// time per transfer.
func (t *tester) report(out io.Writer, d time.Duration) {
	o := t.o
	usec := float64(d.Microseconds())
	if usec == 0 {
		usec = 1
	}
	bytes := int64(o.iterations) * int64(o.count) * int64(o.size) * 2
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", "custom",
		sizeStr(int64(o.size)), cntStr(int64(o.count)), cntStr(int64(o.iterations)), sizeStr(bytes),
		usec/1e6, float64(bytes*8)/(1000*usec), usec/float64(o.iterations)/float64(o.count*2))
}

// sizeStr is common.c's size_str.
func sizeStr(n int64) string {
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

// openDevice opens the device on -b, else (client) on the address that
// routes to the server.
func openDevice(o options) (*verbs.Device, error) {
	if o.bind != "" {
		return netdev.OpenAddr(o.bind)
	}
	if o.server == "" {
		return nil, errors.New("the server needs -b (uroce binds one address)")
	}
	dst, err := netdev.Resolve(o.server, o.port)
	if err != nil {
		return nil, err
	}
	return netdev.OpenToward(dst.Addr().String())
}
