package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

type options = cli.Echo

// program is the whole program; run is its body once the device is open.
var program = cli.EchoProgram{Name: "rsockethttp", Port: 8080, Size: 1024, What: "requests", Serve: serve, Call: fetch}

func main() { program.Main() }

func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	return program.Run(ctx, d, o, out)
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
