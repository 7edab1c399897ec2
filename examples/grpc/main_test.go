package main

import (
	"testing"

	"github.com/uroce/uroce/examples/internal/progtest"
)

// TestLoopback serves and calls over a loopback pair (no root): every
// message comes back whole at 64 B, 4 KiB and 64 KiB.
func TestLoopback(t *testing.T) {
	progtest.Echo(t, program, []options{{Count: 50, Size: 64}, {Count: 50, Size: 4 << 10}, {Count: 20, Size: 64 << 10}})
}
