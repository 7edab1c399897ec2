package main

import (
	"testing"

	"github.com/uroce/uroce/examples/internal/progtest"
)

// TestLoopback runs the server and the client against each other over the
// kernel's loopback (no root), verifying the data, and checks the flags
// (riostream's transfers are at least 2 bytes).
func TestLoopback(t *testing.T) {
	progtest.Stream(t, "riostream", 2, run, []progtest.StreamCase{
		{Size: 1000, Count: 100, Iterations: 1},
		{Size: 64, Count: 50, Iterations: 3},
		{Size: 1 << 20, Count: 4, Iterations: 2},
		{Size: 2, Count: 10, Iterations: 2},
	})
}
