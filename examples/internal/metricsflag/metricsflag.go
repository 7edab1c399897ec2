// Package metricsflag serves the examples' -metrics ADDR flag: Prometheus
// metrics of the program's devices at http://ADDR/metrics while it runs
// (package metrics does the work; this is the examples' one call).
package metricsflag

import (
	"fmt"
	"io"
	"slices"

	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// Usage is the flag's help text.
const Usage = "serve Prometheus metrics at http://`addr`/metrics while running, e.g. :9090"

// Serve starts serving the devices, each labelled device=its name, and
// prints the page's address to out. With addr empty it does nothing and
// returns a nil server, whose Close is safe to call.
func Serve(addr string, out io.Writer, devs map[string]*verbs.Device) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	s, err := metrics.Listen(addr)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(devs))
	for n := range devs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := s.Register(devs[n], n); err != nil {
			s.Close()
			return nil, err
		}
	}
	fmt.Fprintf(out, "metrics: %s\n", s.URL())
	return &Server{s}, nil
}

// Server is a running metrics server.
type Server struct{ *metrics.Server }

// Close stops serving; a nil Server does nothing.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	return s.Server.Close()
}
