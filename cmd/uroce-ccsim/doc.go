// Command uroce-ccsim is a discrete-event simulator of congestion control
// for uroce: N senders share one switch egress port towards one receiver,
// and every sender runs the real package cc code (the same Algorithm and
// Pacer the engine uses) with simulated time passed in.
//
// The model: each sender's NIC serialises packets at the link rate; the
// switch port drains at the link rate with a finite buffer, RED/ECN marking
// (netem.RED) on enqueue and optional PFC pause above a threshold; the receiver
// acknowledges every packet and runs the notification point, sending CNPs
// back. The port stamps in-band network telemetry on each packet as it
// starts to leave (bytes queued behind it, its transmitted bytes counter,
// link rate, time) and the receiver echoes it in the ACK, for HPCC
// (cc.INTAlgorithm). ACKs, CNPs and pause frames return over an
// uncongested path.
// Runs are deterministic for a seed.
//
// It ships scenarios (two flows converging, 8:1 and 16:1 incast, a flow
// joining and leaving), runs each with every algorithm, prints one table
// (Jain's fairness index, queue percentiles, utilisation, time to converge)
// and writes CSV and PNG plots of per-flow throughput and queue length.
//
//	uroce-ccsim -out /tmp/ccsim                # all scenarios, all algorithms
//	uroce-ccsim -scenario incast16 -algo dcqcn # one of each
package main
