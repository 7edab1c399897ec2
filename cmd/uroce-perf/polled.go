package main

// polled reads b[i] as perftest's write_lat reads the last byte of its
// receive buffer: memory the transport writes when the peer's RDMA WRITE
// arrives, with no completion to order the two. Whoever drives the
// device's engine does that write; with -R the CM's goroutine drives it
// too (rdmacm's GSI receive loop), so the poll and the write are
// concurrent, like a CPU polling what a NIC DMAs. The race detector would
// report it; the byte is only compared, and a stale value is read again
// on the next turn. Not inlined (the directive forbids it under -race),
// so every turn loads it anew.
//
//go:norace
func polled(b []byte, i int) byte { return b[i] }
