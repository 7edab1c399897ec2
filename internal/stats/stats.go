// Package stats holds the small summaries the benchmark tools share.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of v, the mean of the middle two for an even
// count, and NaN for none. v is left as it was.
func Median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}
