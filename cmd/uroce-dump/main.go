package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/google/gopacket/pcapgo"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "uroce-dump:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: uroce-dump -r FILE | -i IFACE [-w FILE] [-c N] [--qp QPN] [--class LIST] [--stats] [-q] [--json]")

// run is main without the exit, for tests. -h prints the usage to stderr
// and returns nil: asking for help is not an error. A bad flag prints the
// usage and returns the error, which main prints once (the flag package
// would print it too).
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("uroce-dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintln(stderr, errUsage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	var (
		readFile  = fs.String("r", "", "read packets from this pcap or pcapng `file`")
		iface     = fs.String("i", "", "capture live from this `interface` (AF_PACKET, needs root)")
		writeFile = fs.String("w", "", "also write the frames shown to this pcap `file`")
		qp        = fs.String("qp", "", "show only this `QPN`'s connection (dest QP, and the reverse direction once its peer is learnt)")
		classes   = fs.String("class", "", "show only these `classes`: send,write,read,atomic,ack,cnp,ud,flush")
		opt       options
	)
	fs.IntVar(&opt.count, "c", 0, "stop after `n` packets shown (0: no limit)")
	fs.BoolVar(&opt.stats, "stats", false, "print a summary per flow (src IP, dst IP, dest QP) at the end")
	fs.BoolVar(&opt.quiet, "q", false, "do not print packets")
	fs.BoolVar(&opt.json, "json", false, "print JSON lines instead of text")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 || (*readFile == "") == (*iface == "") {
		return errUsage
	}
	if opt.count < 0 {
		return fmt.Errorf("-c %d: the packet count must be 0 (no limit) or more", opt.count)
	}
	if *qp != "" {
		v, err := strconv.ParseUint(*qp, 0, 24)
		if err != nil {
			return fmt.Errorf("--qp: %w", err)
		}
		opt.qp, opt.hasQP = uint32(v), true
	}
	if *classes != "" {
		c, err := parseClasses(*classes)
		if err != nil {
			return err
		}
		opt.classes = c
	}

	if *readFile != "" {
		f, err := os.Open(*readFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if *writeFile == "" {
			_, err := dump(stdout, *readFile, f, opt)
			return err
		}
		// -r with -w: a filtered copy of the file.
		src, err := openCapture(*readFile, f)
		if err != nil {
			return err
		}
		d := newDumper(stdout, opt)
		return withWriter(d, *writeFile, src, func() error { return d.run(src) })
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	src, err := openLive(ctx, *iface)
	if err != nil {
		return err
	}
	defer src.Close()
	d := newDumper(stdout, opt)
	run := func() error { return d.run(src) }
	if *writeFile != "" {
		return withWriter(d, *writeFile, src, run)
	}
	err = run()
	if ferr := d.finish(); err == nil {
		err = ferr
	}
	return err
}

// withWriter runs fn with d writing frames to the pcap file name, then
// prints the summary and closes the file.
func withWriter(d *dumper, name string, src packetSource, fn func() error) error {
	w, err := os.Create(name)
	if err != nil {
		return err
	}
	d.pcapw = pcapgo.NewWriterNanos(w)
	if err := d.pcapw.WriteFileHeader(262144, src.LinkType()); err != nil {
		w.Close()
		return fmt.Errorf("write capture: %w", err)
	}
	err = fn()
	if ferr := d.finish(); err == nil {
		err = ferr
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}
