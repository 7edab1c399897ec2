package netem_test

import (
	"testing"

	"github.com/uroce/uroce/pkg/netem"
)

func TestRED(t *testing.T) {
	r := netem.PaperRED()
	tests := []struct {
		q    int
		want float64
	}{
		{0, 0}, {5 << 10, 0}, {5<<10 + 195<<9, 0.005}, {200 << 10, 0.01}, {200<<10 + 1, 1}, {1 << 30, 1},
	}
	for _, tt := range tests {
		if got := r.Prob(tt.q); got != tt.want {
			t.Errorf("Prob(%d) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if !r.Mark(300<<10, 0.999) || r.Mark(100<<10, 0.5) || !r.Mark(100<<10, 0.001) {
		t.Fatal("Mark disagrees with Prob")
	}
}
