package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/uroce/uroce/examples/internal/streamcli"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
	"golang.org/x/sys/unix"
)

func main() { streamcli.Main("riostream", 2, run) }

// run is the whole program once the device is open. It closes d.
func run(ctx context.Context, d *verbs.Device, o streamcli.Options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	c, stop, err := streamcli.Connect(ctx, d, o, out)
	if err != nil {
		return err
	}
	defer stop()
	// The buffer the peer writes into is mapped outside the Go heap, as
	// a C program's would be: the loop that polls it reads memory the
	// device writes, which is no Go object's.
	buf, err := unix.Mmap(-1, 0, o.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	defer unix.Munmap(buf)
	t := tester{ctx: ctx, c: c, o: o, buf: buf}
	err = t.run(out)
	return errors.Join(err, c.Close())
}

// tester is riostream's run_test for one stream.
type tester struct {
	ctx      context.Context
	c        *rsocket.Conn
	o        streamcli.Options
	buf      []byte
	sendData byte  // format_buf's running byte
	recvData byte  // verify_buf's running byte
	received int64 // verify_buf's byte count, for its message
}

func (t *tester) run(out io.Writer) error {
	client := t.o.Server != ""
	size := t.o.Size
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
	for range t.o.Iterations {
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
	streamcli.Report(out, t.o, time.Since(start))
	return t.c.IOUnmap(t.buf)
}

// send writes the buffer into the peer's -C times, the last with marker
// in its last byte.
func (t *tester) send(marker byte) error {
	size := t.o.Size
	for i := range t.o.Count {
		if i == t.o.Count-1 {
			t.buf[size-1] = marker
			if t.o.Verify {
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
	size := t.o.Size
	for spins := 0; loadByte(t.buf, size-1) != marker; spins++ {
		if spins%1024 == 0 {
			if err := t.ctx.Err(); err != nil {
				return fmt.Errorf("waiting for marker %d: %w", marker, err)
			}
		}
		runtime.Gosched()
	}
	if t.o.Verify {
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
