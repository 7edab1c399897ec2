package metrics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// TestServer: Listen on a free loopback port serves the devices
// registered later plus the Go runtime's metrics; a second device of the
// same name is refused; a bad address fails at Listen.
func TestServer(t *testing.T) {
	s, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	la, lb := pipe.New(pipe.Config{})
	da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer da.Close()
	defer db.Close()
	if err := s.Register(da, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(db, "a"); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("same name twice: %v", err)
	}
	fams := scrape(t, s.URL())
	for _, name := range []string{"uroce_sent_pkts_total", "uroce_completion_latency_seconds", "go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("no %s at %s", name, s.URL())
		}
	}
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
		t.Errorf("address %v", s.Addr())
	}
	if _, err := metrics.Listen("256.0.0.1:1"); err == nil {
		t.Error("Listen on a bad address succeeded")
	}
}
