// Package netem emulates a network path for tests and simulation. Heap
// orders what is in flight by time, so a seeded run replays exactly.
package netem
