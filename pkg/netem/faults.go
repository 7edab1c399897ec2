package netem

import "time"

// Faults are one direction's impairments. The zero value is a perfect wire.
type Faults struct {
	Drop, Duplicate, Reorder, Corrupt float64
	// ReorderAfter is how many later packets overtake a held one; 0 means 3.
	ReorderAfter int
	// ReorderMaxHold bounds how long a packet is held, on the path's
	// clock; 0 means 10 ms.
	ReorderMaxHold time.Duration
	Delay, Jitter  time.Duration
	// Rate is the bottleneck rate in bytes/s (IP datagram bytes); 0 means
	// no bottleneck.
	Rate float64
	// QueueLimit tail-drops packets that would make the queue exceed it,
	// in bytes; 0 means unlimited.
	QueueLimit int
	// ECN marks CE on the queue when set, as the simulator's switch
	// does (DCQCN §3.1).
	ECN *RED
}

// Stats counts what a Path did to the packets sent through it.
type Stats struct {
	Dropped, QueueDropped, Marked, Corrupted, Duplicated, Reordered uint64
}
