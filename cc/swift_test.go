package cc_test

import (
	"math"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

func newSwift(t *testing.T, init float64) (*cc.Swift, cc.SwiftParams) {
	t.Helper()
	p := cc.DefaultSwift()
	p.MSS = 1000
	p.InitCwnd = init
	s, err := cc.NewSwift(p, cc.FirmwareNP(), 40*cc.Gbps)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// Multiplicative decrease happens at most once per RTT.
func TestSwiftDecreaseOncePerRTT(t *testing.T) {
	s, p := newSwift(t, 10)
	rtt := 100 * us
	steps := []struct {
		t        time.Duration
		decrease bool
	}{{0, true}, {50 * us, false}, {99 * us, false}, {100 * us, true}, {150 * us, false}, {200 * us, true}}
	for _, st := range steps {
		before := s.Cwnd()
		target := s.Target()
		s.OnAck(at(st.t), p.MSS, rtt)
		want := before
		if st.decrease {
			f := math.Max(1-p.Beta*float64(rtt-target)/float64(rtt), 1-p.MaxMDF)
			want = before * f
		}
		if math.Abs(s.Cwnd()-want) > 1e-9 {
			t.Fatalf("at %v: cwnd %v, want %v (before %v)", st.t, s.Cwnd(), want, before)
		}
	}
}

func TestSwiftIncrease(t *testing.T) {
	s, p := newSwift(t, 10)
	s.OnAck(t0, 2*p.MSS, 10*us) // below target: cwnd += ai/cwnd per packet
	if want := 10 + 2*p.AI/10; math.Abs(s.Cwnd()-want) > 1e-9 {
		t.Fatalf("cwnd %v, want %v", s.Cwnd(), want)
	}
	if s.Window() != int(s.Cwnd()*1000) || s.Rate() != 40*cc.Gbps {
		t.Fatalf("window %d rate %v", s.Window(), s.Rate())
	}
	u, _ := newSwift(t, 0.5)
	u.OnAck(t0, p.MSS, 10*us) // below one packet: cwnd += ai per packet
	if math.Abs(u.Cwnd()-1.5) > 1e-9 {
		t.Fatalf("cwnd %v, want 1.5", u.Cwnd())
	}
}

// Below one packet of window Swift paces: cwnd·MSS per RTT.
func TestSwiftPacing(t *testing.T) {
	s, p := newSwift(t, 0.5)
	s.OnAck(t0, 0, 20*us)
	if got, want := s.Rate(), cc.Rate(0.5*1000*8/20e-6); got != want {
		t.Fatalf("rate %v, want %v", got, want)
	}
	if s.Window() != p.MSS {
		t.Fatalf("window %d, want one packet", s.Window())
	}
}

func TestSwiftFlowScaling(t *testing.T) {
	p := cc.DefaultSwift()
	for _, tt := range []struct {
		cwnd float64
		want time.Duration
	}{{p.FSMinCwnd, p.BaseTarget + p.FSRange}, {p.FSMaxCwnd, p.BaseTarget}, {p.MaxCwnd, p.BaseTarget}, {p.MinCwnd, p.BaseTarget + p.FSRange}} {
		p.InitCwnd = tt.cwnd
		s, _ := cc.NewSwift(p, cc.FirmwareNP(), 40*cc.Gbps)
		if got := s.Target(); (got - tt.want).Abs() > time.Nanosecond {
			t.Errorf("target at cwnd %v = %v, want %v", tt.cwnd, got, tt.want)
		}
	}
}

func TestSwiftLoss(t *testing.T) {
	s, p := newSwift(t, 10)
	s.OnLoss(t0)
	if s.Cwnd() != 10*(1-p.MaxMDF) {
		t.Fatalf("cwnd %v after one loss", s.Cwnd())
	}
	for i := range p.RetxResetThreshold - 1 {
		s.OnLoss(at(time.Duration(i) * us))
	}
	if s.Cwnd() != p.MinCwnd {
		t.Fatalf("cwnd %v after %d losses, want %v", s.Cwnd(), p.RetxResetThreshold, p.MinCwnd)
	}
}
