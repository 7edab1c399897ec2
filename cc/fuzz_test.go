package cc_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

// drive feeds an algorithm events decoded from data, with time moving
// forward, and calls check after each.
func drive(a cc.Algorithm, data []byte, check func(now time.Time, ev byte)) {
	now := t0
	for i := 0; i+1 < len(data); i += 2 {
		ev, arg := data[i], data[i+1]
		now = now.Add(time.Duration(arg) * time.Duration(1+int(ev>>3)) * 100 * time.Nanosecond)
		switch ev % 7 {
		case 0:
			a.OnCNP(now)
		case 1:
			a.OnSent(now, int(arg)*64)
		case 2:
			a.OnAck(now, int(arg)*256, time.Duration(arg)*5*us)
		case 3:
			a.OnCE(now)
		case 4:
			a.OnLoss(now)
		case 5:
			if nt := a.NextTimer(); !nt.IsZero() && nt.After(now) {
				now = nt
			}
			a.OnTimer(now)
		case 6:
			a.OnTimer(now)
		}
		check(now, ev)
	}
}

// FuzzRatesBounded: whatever the events, every algorithm's rate stays in
// [min rate, line rate], DCQCN keeps Rc ≤ Rt ≤ line rate and α ≤ 1023, and a
// timer is never left armed in the past after OnTimer.
func FuzzRatesBounded(f *testing.F) {
	f.Add(uint8(1), uint8(40), []byte{0, 0, 5, 255, 1, 255, 0, 1, 0, 2, 6, 255})
	f.Add(uint8(2), uint8(100), []byte{2, 4, 2, 120, 2, 10, 2, 200, 2, 1})
	f.Add(uint8(3), uint8(25), []byte{2, 4, 2, 120, 4, 0, 4, 0, 2, 200, 2, 1})
	f.Add(uint8(0), uint8(1), []byte{0, 0, 3, 3})
	f.Fuzz(func(t *testing.T, kind, gbps uint8, data []byte) {
		k := cc.Kind(kind % 4)
		line := cc.Rate(1+int(gbps)) * cc.Gbps
		cfg := cc.DefaultConfig(k, line)
		if kind&0x80 != 0 {
			cfg.DCQCN = cc.PaperDCQCN()
		}
		a, err := cc.New(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		lo := map[cc.Kind]cc.Rate{cc.KindNone: line, cc.KindDCQCN: cfg.DCQCN.MinRate,
			cc.KindTIMELY: cfg.TIMELY.MinRate, cc.KindSwift: cfg.Swift.MinRate}[k]
		drive(a, data, func(now time.Time, ev byte) {
			s := a.Stats(now)
			if r := a.Rate(); r < lo || r > line || s.Rate != r {
				t.Fatalf("%v: rate %v outside [%v, %v] (stats %v)", k, r, lo, line, s.Rate)
			}
			if k == cc.KindDCQCN && (s.TargetRate < s.Rate || s.TargetRate > line || s.Alpha > 1023) {
				t.Fatalf("dcqcn: Rc %v Rt %v α %d", s.Rate, s.TargetRate, s.Alpha)
			}
			if w := a.Window(); w < 0 {
				t.Fatalf("%v: window %d", k, w)
			}
			if ev%7 >= 5 {
				if nt := a.NextTimer(); !nt.IsZero() && !nt.After(now) {
					t.Fatalf("%v: timer %v still due after OnTimer(%v)", k, nt.Sub(t0), now.Sub(t0))
				}
			}
		})
	})
}
