package cc

import "time"

// DefaultPresetName names the configuration DefaultPreset returns.
const DefaultPresetName = "swift-stable"

// DefaultPreset returns the configuration for a QP that turns congestion
// control on without naming an algorithm. (A device whose default Kind is
// KindNone still runs none: that default is the device's.)
//
// It is Swift (Kumar et al., SIGCOMM 2020) with a 15 µs delay target and
// a starting window of what the line rate sends in 2 µs, instead of
// DefaultSwift's 25 µs and 1000 packets. In uroce-ccsim (8 µs fabric, RED
// 5-200 KB) it holds, in every scenario at 40 and 100 Gb/s, Jain ≥ 0.95,
// utilisation ≥ 90 %, no PFC pause with two or three flows and a queue
// p99 under RED's Kmax: the target leaves 7 µs of queue, 35 KB at 40 Gb/s
// and 88 KB at 100 Gb/s, and sixteen flows starting together put at most
// 32 µs of line rate in the queue. With a 15 µs starting window that burst
// was 1.2 MB at 40 Gb/s and held incast16's queue p99 at 497 KB; with
// DefaultSwift's, 16 MB and PFC pauses. DCQCN is not the default because
// no preset of it met these at once (docs/congestion.md has the rows).
// A fabric whose base RTT nears 15 µs needs a larger BaseTarget.
func DefaultPreset(line Rate) Config {
	cfg := DefaultConfig(KindSwift, line)
	sw := &cfg.Swift
	sw.BaseTarget = 15 * time.Microsecond
	bytes := float64(line) / 8 * (2 * time.Microsecond).Seconds()
	sw.InitCwnd = min(max(1, bytes/float64(sw.MSS)), sw.MaxCwnd)
	return cfg
}
