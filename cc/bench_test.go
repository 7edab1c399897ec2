package cc_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

// Each benchmark is one event on the hot path; all must report 0 allocs/op.

func BenchmarkDCQCNOnCNP(b *testing.B) {
	d := newDCQCN(b, cc.FirmwareDCQCN(), 100*cc.Gbps)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(5 * us)
		d.OnCNP(now)
	}
}

func BenchmarkDCQCNOnSent(b *testing.B) {
	d := newDCQCN(b, cc.FirmwareDCQCN(), 100*cc.Gbps)
	d.OnCNP(t0)
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(40 * time.Nanosecond)
		d.OnSent(now, 4096)
		if i++; i%1000 == 0 {
			d.OnCNP(now)
		}
	}
}

func BenchmarkDCQCNOnTimer(b *testing.B) {
	d := newDCQCN(b, cc.FirmwareDCQCN(), 100*cc.Gbps)
	d.OnCNP(t0)
	b.ReportAllocs()
	for b.Loop() {
		if d.NextTimer().IsZero() {
			d.OnCNP(t0)
		}
		d.OnTimer(d.NextTimer())
	}
}

func BenchmarkNPOnCE(b *testing.B) {
	d := newDCQCN(b, cc.FirmwareDCQCN(), 100*cc.Gbps)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		d.OnCE(now)
	}
}

func BenchmarkTIMELYOnAck(b *testing.B) {
	p := cc.DefaultTIMELY()
	p.SegmentBytes = 0
	tm, _ := cc.NewTIMELY(p, cc.FirmwareNP(), 100*cc.Gbps)
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		i++
		tm.OnAck(now, 4096, time.Duration(20+i%100)*us)
	}
}

func BenchmarkSwiftOnAck(b *testing.B) {
	s, _ := cc.NewSwift(cc.DefaultSwift(), cc.FirmwareNP(), 100*cc.Gbps)
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		i++
		s.OnAck(now, 1024, time.Duration(10+i%40)*us)
	}
}

// Through the interface, as the engine calls it.
func BenchmarkAlgorithmInterface(b *testing.B) {
	cfg := cc.DefaultConfig(cc.KindDCQCN, 100*cc.Gbps)
	a, _ := cc.New(&cfg)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		a.OnSent(now, 4096)
		a.OnAck(now, 4096, 10*us)
		if a.OnCE(now) {
			a.OnCNP(now)
		}
		a.OnTimer(now)
		_ = a.Rate()
	}
}

func BenchmarkPacer(b *testing.B) {
	p := cc.NewPacer(100*cc.Gbps, 64<<10)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(p.Delay(now, 4096))
		p.Take(now, 4096)
	}
}

// 10 000 QPs' pacers, visited round robin as the engine's scheduler would.
func BenchmarkPacer10kQPs(b *testing.B) {
	ps := make([]cc.Pacer, 10_000)
	for i := range ps {
		ps[i] = cc.NewPacer(cc.Rate(1+i%100)*cc.Gbps, 16<<10)
	}
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(10 * time.Nanosecond)
		p := &ps[i]
		if p.Delay(now, 4096) == 0 {
			p.Take(now, 4096)
		}
		if i++; i == len(ps) {
			i = 0
		}
	}
}

func BenchmarkHPCCOnINT(b *testing.B) {
	h, _ := cc.NewHPCC(cc.PaperHPCC(), cc.FirmwareNP(), 100*cc.Gbps)
	var a cc.INTAlgorithm = h // as an engine holds it
	path := cc.INTPath{N: 3}
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(100 * time.Nanosecond)
		i++
		for j := range path.N {
			hop := &path.Hops[j]
			hop.Rate = 100 * cc.Gbps
			hop.TS += 100
			hop.TxBytes += 1250
			hop.QLen = uint32(i % 50_000)
		}
		a.OnINT(now, 1024, 9*us, &path)
		_ = a.Rate()
	}
}
