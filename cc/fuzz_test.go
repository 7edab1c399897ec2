package cc_test

import (
	"math"
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

// FuzzHPCCBounded: whatever telemetry arrives (hops appearing, counters
// and clocks jumping or going back), HPCC's rate stays in [min rate, line
// rate], its window in [one packet, W_init], U finite and not negative.
func FuzzHPCCBounded(f *testing.F) {
	f.Add(uint8(40), []byte{1, 0, 10, 10, 1, 5, 200, 20, 2, 9, 9, 9, 1, 0, 0, 0})
	f.Add(uint8(100), []byte{3, 255, 255, 1, 3, 0, 0, 0, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, gbps uint8, data []byte) {
		line := cc.Rate(1+int(gbps)) * cc.Gbps
		p := cc.PaperHPCC()
		h, err := cc.NewHPCC(p, cc.FirmwareNP(), line)
		if err != nil {
			t.Fatal(err)
		}
		wInit := int(float64(line) / 8 * p.BaseRTT.Seconds())
		var path cc.INTPath
		now := t0
		for i := 0; i+3 < len(data); i += 4 {
			n, q, tx, dt := data[i], data[i+1], data[i+2], data[i+3]
			now = now.Add(time.Duration(dt) * 50 * time.Nanosecond)
			path.N = int(n % (cc.MaxINTHops + 2)) // 0 and MaxINTHops+1 are malformed
			for j := range min(path.N, cc.MaxINTHops) {
				hop := &path.Hops[j]
				hop.Rate = line
				hop.QLen = uint32(q) << (j * 3)
				hop.TxBytes += uint64(tx) << (4 + j)
				if dt > 250 {
					hop.TS -= uint64(dt) // a clock going back
				} else {
					hop.TS += uint64(dt) * 50
				}
			}
			h.OnINT(now, 1024, time.Duration(dt)*us, &path)
			if r := h.Rate(); r < p.MinRate || r > line {
				t.Fatalf("rate %v outside [%v, %v]", r, p.MinRate, line)
			}
			if w := h.Window(); w < p.MSS || w > max(wInit, p.MSS) {
				t.Fatalf("window %d outside [%d, %d]", w, p.MSS, wInit)
			}
			if u := h.U(); !(u >= 0) || math.IsInf(u, 0) {
				t.Fatalf("U %v", u)
			}
		}
	})
}
