package streamcli

import "testing"

func TestSizeStr(t *testing.T) {
	for n, want := range map[int64]string{64: "64", 1000: "1000", 1536: "1.5k", 4096: "4k", 3 << 20: "3m", 12345678: "11m"} {
		if got := SizeStr(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
