package main

import "testing"

// TestRun runs the whole comparison, small: both transports must echo every
// size (the numbers themselves are not checked; the machine is shared),
// with -metrics served on a free port.
func TestRun(t *testing.T) {
	if err := run(0, 200, 4, []int{64, 1024, 16 << 10}, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
}
