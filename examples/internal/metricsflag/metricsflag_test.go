package metricsflag

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

func TestServe(t *testing.T) {
	s, err := Serve("", io.Discard, nil)
	if s != nil || err != nil || s.Close() != nil {
		t.Fatalf("empty address: %v %v", s, err)
	}
	la, lb := pipe.New(pipe.Config{})
	a, b := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer a.Close()
	defer b.Close()
	var out strings.Builder
	s, err = Serve("127.0.0.1:0", &out, map[string]*verbs.Device{"client": a, "server": b})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out.String() != "metrics: "+s.URL()+"\n" {
		t.Errorf("printed %q", out.String())
	}
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`uroce_sent_pkts_total{device="client"} 0`, `uroce_sent_pkts_total{device="server"} 0`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if _, err := Serve("127.0.0.1:-1", io.Discard, nil); err == nil {
		t.Error("bad address served")
	}
}
