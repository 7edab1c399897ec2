package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

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
	fs := flag.NewFlagSet("riostream", flag.ContinueOnError)
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
	case o.size < 2 || o.count < 1 || o.iterations < 1:
		// A 1-byte transfer would be all marker.
		return o, fmt.Errorf("bad size %d, count %d or iterations %d", o.size, o.count, o.iterations)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("riostream", err)
	}
	ctx, cancel := cli.Context(o.timeout)
	d, err := openDevice(o)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "riostream:", err)
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
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	// The buffer the peer writes into is mapped outside the Go heap, as
	// a C program's would be: the loop that polls it reads memory the
	// device writes, which is no Go object's.
	buf, err := unix.Mmap(-1, 0, o.size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	defer unix.Munmap(buf)
	t := tester{ctx: ctx, c: c, o: o, buf: buf}
	err = t.run(out)
	return errors.Join(err, c.Close())
}

func printHeader(out io.Writer) {
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
		"name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
}

// tester is riostream's run_test for one stream.
type tester struct {
	ctx      context.Context
	c        *rsocket.Conn
	o        options
	buf      []byte
	sendData byte  // format_buf's running byte
	recvData byte  // verify_buf's running byte
	received int64 // verify_buf's byte count, for its message
}

func (t *tester) run(out io.Writer) error {
	client := t.o.server != ""
	size := t.o.size
	t.buf[size-1] = 0xff // riostream's *poll_byte = -1
	if _, err := t.c.IOMap(t.buf, 0); err != nil {
		return err
	}
	// sync_test, on the stream.
	var msg [16]byte
	for _, send := range []bool{client, !client} {
		var err error
		if send {
			_, err = t.c.Write(msg[:])
		} else {
			_, err = io.ReadFull(t.c, msg[:])
		}
		if err != nil {
			return err
		}
	}
	var marker byte
	start := time.Now()
	for range t.o.iterations {
		if !client {
			if err := t.recv(marker); err != nil {
				return err
			}
			marker++
		}
		if err := t.send(marker); err != nil {
			return err
		}
		marker++
		if client {
			if err := t.recv(marker); err != nil {
				return err
			}
			marker++
		}
	}
	t.report(out, time.Since(start))
	return t.c.IOUnmap(t.buf)
}

// send writes the buffer into the peer's -C times, the last with marker
// in its last byte.
func (t *tester) send(marker byte) error {
	size := t.o.size
	for i := range t.o.count {
		if i == t.o.count-1 {
			t.buf[size-1] = marker
			if t.o.verify {
				for j := range t.buf[:size-1] {
					t.buf[j] = t.sendData
					t.sendData++
				}
			}
		}
		if _, err := t.c.IOWrite(t.buf, 0); err != nil {
			return err
		}
	}
	return nil
}

// recv polls the last byte of the buffer for marker (recv_xfer).
func (t *tester) recv(marker byte) error {
	size := t.o.size
	for spins := 0; loadByte(t.buf, size-1) != marker; spins++ {
		if spins%1024 == 0 {
			if err := t.ctx.Err(); err != nil {
				return fmt.Errorf("waiting for marker %d: %w", marker, err)
			}
		}
		runtime.Gosched()
	}
	if t.o.verify {
		for _, b := range t.buf[:size-1] {
			if b != t.recvData {
				return fmt.Errorf("data verification failed byte %d", t.received)
			}
			t.recvData++
			t.received++
		}
	}
	return nil
}

// report prints show_perf's line.
func (t *tester) report(out io.Writer, d time.Duration) {
	o := t.o
	usec := max(float64(d.Microseconds()), 1)
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
