//go:build !race

package ccbottleneck_test

const raceEnabled = false
