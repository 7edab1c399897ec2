package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

type options = cli.Echo

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("rsockethttp", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.Flags(fs, 8080, 1024, "requests")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	return o, o.Check()
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("rsockethttp", err)
	}
	ctx, cancel := cli.Context(o.Timeout)
	defer cancel()
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rsockethttp:", err)
		os.Exit(1)
	}
}

// run is the whole program once the device is open. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	if o.Server == "" {
		return serve(ctx, d, o, out)
	}
	return fetch(ctx, d, o, out)
}

// serve runs net/http on the rsocket listener until ctx ends.
func serve(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	l, err := rsocket.Listen(ctx, d, fmt.Sprintf(":%d", o.Port))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		// An HTTP/1 handler reads the body before it answers (net/http's
		// ResponseWriter.Write).
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "serving HTTP on rsocket %v\n", l.Addr())
	o.Listen()
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fetch posts the requests through a Transport that dials rsocket
// streams, and checks and times them.
func fetch(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return rsocket.Dial(ctx, d, addr)
		},
		MaxIdleConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := fmt.Sprintf("http://%s/echo", net.JoinHostPort(o.Server, fmt.Sprint(o.Port)))
	body := make([]byte, o.Size)
	for i := range body {
		body[i] = byte(i * 31)
	}
	rtts := make([]time.Duration, 0, o.Count)
	for i := range o.Count {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		rtts = append(rtts, time.Since(start))
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
			return fmt.Errorf("request %d: %s, %d bytes back of %d", i, resp.Status, len(got), len(body))
		}
	}
	slices.Sort(rtts)
	fmt.Fprintf(out, "%d requests of %d bytes echoed: round trip median %v, max %v\n",
		len(rtts), o.Size, rtts[len(rtts)/2], rtts[len(rtts)-1])
	return nil
}
