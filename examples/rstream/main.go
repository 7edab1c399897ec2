package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/uroce/uroce/examples/internal/streamcli"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

func main() { streamcli.Main("rstream", 1, run) }

// run is the whole program once the device is open. It closes d.
func run(ctx context.Context, d *verbs.Device, o streamcli.Options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	c, stop, err := streamcli.Connect(ctx, d, o, out)
	if err != nil {
		return err
	}
	defer stop()
	t := tester{c: c, o: o, buf: make([]byte, o.Size)}
	err = t.run(out)
	return errors.Join(err, c.Close())
}

// tester is rstream's run_test for one stream.
type tester struct {
	c        *rsocket.Conn
	o        streamcli.Options
	buf      []byte
	sendData byte  // format_buf's running byte
	recvData byte  // verify_buf's running byte
	received int64 // verify_buf's byte count, for its message
}

func (t *tester) run(out io.Writer) error {
	client := t.o.Server != ""
	// sync_test: 16 bytes from the client, 16 back.
	if err := t.step(client, 16); err != nil {
		return err
	}
	if err := t.step(!client, 16); err != nil {
		return err
	}
	start := time.Now()
	for range t.o.Iterations {
		for _, sending := range []bool{client, !client} {
			for range t.o.Count {
				if err := t.step(sending, t.o.Size); err != nil {
					return err
				}
			}
		}
	}
	streamcli.Report(out, t.o, time.Since(start))
	return nil
}

// step is send_xfer or recv_xfer.
func (t *tester) step(send bool, size int) error {
	b := t.buf[:size]
	if send {
		if t.o.Verify {
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
	if t.o.Verify {
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
