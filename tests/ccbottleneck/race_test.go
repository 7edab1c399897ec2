//go:build race

package ccbottleneck_test

// raceEnabled says the race detector is on: it slows every sender and the
// engines' control loop several times over, so the bottleneck's timing
// properties would measure the detector, not congestion control.
const raceEnabled = true
