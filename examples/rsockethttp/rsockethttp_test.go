package main

import (
	"testing"

	"github.com/uroce/uroce/examples/internal/progtest"
)

// TestLoopback serves and fetches over a loopback pair (no root): every
// body comes back whole, from 0 bytes to 1 MiB.
func TestLoopback(t *testing.T) {
	progtest.Echo(t, program, []options{{Count: 20, Size: 0}, {Count: 50, Size: 100}, {Count: 10, Size: 64 << 10}, {Count: 3, Size: 1 << 20}})
}
