package main

import (
	"fmt"
	"os"

	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// serveMetrics serves the device's Prometheus metrics on cfg.metrics (the
// --metrics flag) until the returned stop is called; without the flag it
// does nothing. The page's address goes to standard error, so standard
// output stays perftest's report.
func serveMetrics(cfg *config, dev *verbs.Device, name string) (stop func(), err error) {
	if cfg.metrics == "" {
		return func() {}, nil
	}
	s, err := metrics.Listen(cfg.metrics)
	if err != nil {
		return nil, err
	}
	if err := s.Register(dev, name); err != nil {
		s.Close()
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "metrics: %s\n", s.URL())
	return func() {
		if cfg.metricsDone != nil {
			cfg.metricsDone(s)
		}
		s.Close()
	}, nil
}
