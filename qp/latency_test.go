package qp

import (
	"fmt"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/hist"
	"github.com/uroce/uroce/pkg/netem"
)

// TestLatency: over a pipe with a fixed one-way delay and a fake clock, a
// signaled WR's completion latency is exactly its round trip plus the
// time it waited to be posted; unsignaled and failed WRs are not
// recorded; a destroyed QP's latencies stay in the engine's.
func TestLatency(t *testing.T) {
	const delay = 10 * time.Microsecond
	tests := []struct {
		name    string
		wr      SendWR
		post    time.Duration // how long before the post the engine last ran
		want    []time.Duration
		wantErr bool
	}{
		{"write signaled", SendWR{Opcode: WRWrite, Flags: FlagSignaled}, 0, []time.Duration{2 * delay}, false},
		{"read signaled", SendWR{Opcode: WRRead, Flags: FlagSignaled}, 0, []time.Duration{2 * delay}, false},
		{"write posted later", SendWR{Opcode: WRWrite, Flags: FlagSignaled}, 5 * time.Microsecond, []time.Duration{2 * delay}, false},
		{"write unsignaled", SendWR{Opcode: WRWrite}, 0, nil, false},
		{"bad rkey", SendWR{Opcode: WRWrite, Flags: FlagSignaled, RKey: 0xdead}, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Delay: delay}, retry: 7})
			wr := tt.wr
			wr.ID = 9
			wr.SGL = []SGE{p.a.sge(0, 64)}
			wr.RemoteAddr = memBase
			if wr.RKey == 0 {
				wr.RKey = p.b.mr.RKey
			}
			p.a.e.Process(p.now)
			p.now = p.now.Add(tt.post)
			if err := p.a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			p.run(func() bool { return p.a.qp.sq.head == p.a.qp.sq.tail })
			var s hist.Snapshot
			p.a.qp.Latency(&s)
			if s.Count != uint64(len(tt.want)) {
				t.Fatalf("recorded %d latencies, want %d", s.Count, len(tt.want))
			}
			for _, w := range tt.want {
				if got := time.Duration(s.Quantile(0.5)); got != w || time.Duration(s.Max) != w {
					t.Errorf("latency %v (max %v), want %v", got, time.Duration(s.Max), w)
				}
			}
			if got := p.a.qp.State() == StateErr; got != tt.wantErr {
				t.Errorf("QP in ERR: %v, want %v", got, tt.wantErr)
			}
			// The engine's latency is the live QP's, and stays after
			// the QP is destroyed.
			var es hist.Snapshot
			p.a.e.Latency(&es)
			if es != s {
				t.Error("engine's latency differs from its one QP's")
			}
			if err := p.a.e.DestroyQP(p.a.qp); err != nil {
				t.Fatal(err)
			}
			p.a.e.Latency(&es)
			if es != s {
				t.Error("a destroyed QP's latency left the engine's")
			}
		})
	}
}

// TestLatencyMany: many signaled WRITEs under loss; every one is
// recorded, the fastest take one round trip and the retransmitted ones
// at least a retransmission's wait more: the IBA timeout with the fixed
// timer, the RTO's floor with adaptive retransmission.
func TestLatencyMany(t *testing.T) {
	for _, mode := range []RetransFlags{RetransFixed, 0} {
		t.Run(fmt.Sprint(mode&RetransFixed != 0), func(t *testing.T) { testLatencyMany(t, mode) })
	}
}

func testLatencyMany(t *testing.T, mode RetransFlags) {
	const delay = 10 * time.Microsecond
	p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Delay: delay, Drop: 0.05}, seed: 3, retry: 7, timeout: 8, retrans: mode})
	const n = 400
	posted := 0
	for posted < n || p.a.qp.sq.head != p.a.qp.sq.tail {
		if posted < n && p.a.qp.sq.tail-p.a.qp.sq.head < 8 {
			wr := SendWR{ID: uint64(posted), Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
			if err := p.a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		if !p.step() && !p.advance() {
			t.Fatal("pair went quiet")
		}
	}
	var s hist.Snapshot
	p.a.qp.Latency(&s)
	if s.Count != n || p.a.qp.Counters().CompletedSends != n {
		t.Fatalf("recorded %d, completed %d, want %d", s.Count, p.a.qp.Counters().CompletedSends, n)
	}
	if p.a.qp.Counters().Retransmits == 0 {
		t.Fatal("no retransmission under 5 % loss")
	}
	if q := time.Duration(s.Quantile(0)); q < 2*delay*63/64 || q > 2*delay*65/64 {
		t.Errorf("fastest %v, want about %v", q, 2*delay)
	}
	wait := p.a.qp.timeoutDur()
	if mode&RetransFixed == 0 {
		wait = minRTO
	}
	if m := time.Duration(s.Max); m < 2*delay+wait {
		t.Errorf("slowest %v, want at least a round trip and a timeout (%v)", m, wait)
	}
}

// TestStateChange: Modify and the engine's error paths report each move
// once, with the failed WR's status when one moved the QP to ERR.
func TestStateChange(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7})
	var got []StateChange
	p.a.e.OnStateChange = func(c *StateChange) { got = append(got, *c) }
	wr := SendWR{ID: 5, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: 0xbad}
	if err := p.a.qp.PostSend(p.now, &wr); err != nil {
		t.Fatal(err)
	}
	wr.ID = 6
	if err := p.a.qp.PostSend(p.now, &wr); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return p.a.qp.sq.head == p.a.qp.sq.tail })
	if err := p.a.qp.Modify(&Attr{State: StateReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	// A modify to the state the QP is in is no move.
	if err := p.a.qp.Modify(&Attr{State: StateReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	want := []StateChange{
		{QP: p.a.qp, From: StateRTS, To: StateErr, Failed: true, Status: WCRemAccessErr, WRID: 5},
		{QP: p.a.qp, From: StateErr, To: StateReset, ByModify: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The responder's side moved to ERR on the NAK it sent, without a WR.
	var peer []StateChange
	p.b.e.OnStateChange = func(c *StateChange) { peer = append(peer, *c) }
	if err := p.b.qp.Modify(&Attr{State: StateErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	if len(peer) != 0 {
		t.Errorf("peer already in ERR reported %+v", peer)
	}
	if p.b.qp.State() != StateErr {
		t.Errorf("responder state %v after a remote access error", p.b.qp.State())
	}
}
