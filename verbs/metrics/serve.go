package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves /metrics over HTTP: what a program's --metrics ADDR flag
// starts. Its registry holds the Go runtime and process collectors, as
// client_golang's default registry does, and the devices given to
// Register.
type Server struct {
	reg *prometheus.Registry
	ln  net.Listener
	srv *http.Server
}

// Listen listens on addr (host:port; port 0 picks a free one) and serves
// /metrics from a goroutine until Close. It returns the listener's error,
// wrapped.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s := &Server{reg: prometheus.NewRegistry(), ln: ln}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Register adds a device's collector, its series labelled device=name.
func (s *Server) Register(d Device, name string) error {
	_, err := Register(s.reg, d, name)
	return err
}

// Registry returns the server's registry, for an application's own
// metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL returns the address of the metrics page.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/metrics" }

// Close stops serving.
func (s *Server) Close() error {
	if err := s.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
