// Package netem emulates a network path for tests and simulation: a
// switch's RED/ECN marking (the congestion point of DCQCN §3.1) and a
// heap that orders what is in flight by time, so a seeded run replays
// exactly. The pipe link and the congestion simulator (cmd/uroce-ccsim)
// share it.
package netem
