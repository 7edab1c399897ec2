package cc_test

import (
	"testing"

	"github.com/uroce/uroce/cc"
)

// The default preset is Swift with a 15 µs target and a starting window of
// 2 µs of line rate in 1024-byte packets, by hand: 40 Gb/s sends 10000 B in
// 2 µs, 9.765625 packets; 100 Gb/s 25000 B, 24.4140625; 100 Mb/s 25 B,
// raised to one packet.
func TestDefaultPreset(t *testing.T) {
	for _, tt := range []struct {
		line cc.Rate
		init float64
	}{
		{40 * cc.Gbps, 9.765625},
		{100 * cc.Gbps, 24.4140625},
		{100 * cc.Mbps, 1},
	} {
		cfg := cc.DefaultPreset(tt.line)
		if cfg.Kind != cc.KindSwift || cfg.LineRate != tt.line || cfg.Swift.BaseTarget != 15*us ||
			cfg.Swift.InitCwnd != tt.init || cfg.Swift.MSS != 1024 {
			t.Errorf("DefaultPreset(%v) = kind %v line %v target %v init %v mss %d; want swift, 15µs, %v, 1024",
				tt.line, cfg.Kind, cfg.LineRate, cfg.Swift.BaseTarget, cfg.Swift.InitCwnd, cfg.Swift.MSS, tt.init)
		}
		a, err := cc.New(&cfg)
		if err != nil {
			t.Fatalf("New(DefaultPreset(%v)): %v", tt.line, err)
		}
		if w := a.Window(); w != max(int(tt.init*1024), 1024) {
			t.Errorf("DefaultPreset(%v) window %d B", tt.line, w)
		}
	}
	if cc.DefaultPresetName != "swift-stable" {
		t.Errorf("DefaultPresetName %q", cc.DefaultPresetName)
	}
}
