package verbs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/uroce/uroce/verbs"
)

// capture is a slog.Handler that keeps every record's level, message and
// attributes.
type capture struct {
	mu   sync.Mutex
	recs []record
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *capture) WithGroup(string) slog.Handler            { return c }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return nil
}

func (c *capture) records() []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record(nil), c.recs...)
}

// TestLogger: Connect's moves are logged at Debug with the QPN and peer;
// a WRITE to a bad R_Key moves the requester to ERR, logged at Warn with
// the WR's status and ID, and the responder that NAKed it logs its own
// move; after SetLogger(nil) nothing more is logged.
func TestLogger(t *testing.T) {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	var la, lb capture
	a.SetLogger(slog.New(&la))
	b.SetLogger(slog.New(&lb))

	// Reconnect a's QP from RESET so its Connect is logged.
	if err := qa.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := qa.Connect(qb.Endpoint(2000), verbs.ConnectOptions{PSN: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend(&verbs.SendWR{ID: 77, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ma.SGE(0, 8)}, RemoteAddr: mb.Addr(), RKey: mb.RKey() + 1}); err != nil {
		t.Fatal(err)
	}
	if wc := waitOne(ca, cb); wc.Status != verbs.WCRemAccessErr {
		t.Fatalf("status %v", wc.Status)
	}
	a.SetLogger(nil)
	if err := qa.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}

	qpnA, qpnB := fmt.Sprint(qa.QPN()), fmt.Sprint(qb.QPN())
	addrA, addrB := a.Addr().String(), b.Addr().String()
	type want struct {
		level slog.Level
		msg   string
		attrs map[string]string
	}
	debug := func(from, to, peer, peerQPN string) want {
		return want{slog.LevelDebug, "qp state", map[string]string{"qpn": qpnA, "peer": peer, "peer_qpn": peerQPN, "from": from, "to": to}}
	}
	tests := []struct {
		name string
		got  []record
		want []want
	}{
		{"requester", la.records(), []want{
			debug("RTS", "RESET", addrB, qpnB),
			debug("RESET", "INIT", "", "0"),
			debug("INIT", "RTR", addrB, qpnB),
			debug("RTR", "RTS", addrB, qpnB),
			{slog.LevelWarn, "qp error", map[string]string{"qpn": qpnA, "peer": addrB, "peer_qpn": qpnB, "from": "RTS", "to": "ERR",
				"status": "remote access error", "wr_id": "77"}},
		}},
		{"responder", lb.records(), []want{
			{slog.LevelWarn, "qp error", map[string]string{"qpn": qpnB, "peer": addrA, "peer_qpn": qpnA, "from": "RTS", "to": "ERR"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.got) != len(tt.want) {
				t.Fatalf("%d records %+v, want %d", len(tt.got), tt.got, len(tt.want))
			}
			for i, w := range tt.want {
				g := tt.got[i]
				if g.level != w.level || g.msg != w.msg || fmt.Sprint(g.attrs) != fmt.Sprint(w.attrs) {
					t.Errorf("record %d = %v %q %v, want %v %q %v", i, g.level, g.msg, g.attrs, w.level, w.msg, w.attrs)
				}
			}
		})
	}
}

// TestLoggerLevel: through a text handler at Info, the engine's error
// is printed with its attributes and Modify's moves are not.
func TestLoggerLevel(t *testing.T) {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	var buf syncBuffer
	a.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := qa.PostSend(&verbs.SendWR{ID: 5, Opcode: verbs.WRRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ma.SGE(0, 8)}, RemoteAddr: mb.Addr() + 1<<20, RKey: mb.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := waitOne(ca, cb); wc.Status != verbs.WCRemAccessErr {
		t.Fatalf("status %v", wc.Status)
	}
	if err := qa.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	want := fmt.Sprintf(`level=WARN msg="qp error" qpn=%d peer=%v peer_qpn=%d from=RTS to=ERR status="remote access error" wr_id=5`, qa.QPN(), b.Addr(), qb.QPN())
	if !strings.Contains(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("log:\n%s\nwant one line with\n%s", out, want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
