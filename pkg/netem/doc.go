// Package netem emulates a network path for tests and simulation, on the
// caller's clock. A Path runs one direction's packets through seeded loss,
// a bottleneck queue with a switch's RED/ECN marking (the congestion point
// of DCQCN §3.1), a delay line, corruption, duplication and reordering,
// while the link that uses it keeps the packets' bytes. Heap orders what
// is in flight by time, ties in the order they came, so a seeded run
// replays exactly.
//
// The pipe link (pkg/link/pipe) carries its packets through a Path; the
// congestion simulator (cmd/uroce-ccsim) marks its switch port with RED
// and orders its events on a Heap.
package netem
