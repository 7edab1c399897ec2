// Package memlat measures the machine's memory latency by working-set
// size: BenchmarkDependentLoad walks a random cycle through the lines of
// a buffer, each load's address the one before it loaded, so no two
// misses overlap and ns/op is one load's latency at that size.
// BenchmarkSecondLine adds, after each of those loads, one that waits
// for it: in the same 128-byte pair, the same page or a page far off.
//
// The engine's many-QP cost (issue 19, goal 2) is set by it: a message
// on one of 10 000 QP pairs finds its QPs' lines in whichever level
// their working set fits, and every level has its price here.
package memlat
