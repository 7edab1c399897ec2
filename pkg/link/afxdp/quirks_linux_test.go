package afxdp

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckChannels(t *testing.T) {
	for _, c := range []struct {
		name, driver string
		ch           ethtoolChannels
		want         string // "" when accepted, else part of the error
	}{
		{"virtio one pair of one", "virtio_net", ethtoolChannels{maxCombined: 1, combinedCount: 1}, ""},
		{"virtio all pairs", "virtio_net", ethtoolChannels{maxCombined: 2, combinedCount: 2}, ""},
		{"virtio one pair of two", "virtio_net", ethtoolChannels{maxCombined: 2, combinedCount: 1}, "ethtool -L eth0 combined 2"},
		{"virtio two of four", "virtio_net", ethtoolChannels{maxCombined: 4, combinedCount: 2}, "uses 2 of its 4 queue pairs"},
		{"other driver spare pairs", "mlx5_core", ethtoolChannels{maxCombined: 64, combinedCount: 8}, ""},
		{"veth", "veth", ethtoolChannels{maxRx: 2, rxCount: 1, maxTx: 2, txCount: 1}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkChannels("eth0", c.driver, c.ch)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want an ErrConfig saying %q", err, c.want)
			}
		})
	}
}
