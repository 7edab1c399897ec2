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
	// Stall holds a StallRate share of the packets Stall longer, on top
	// of Delay, and the packets after them behind them, in order: a peer
	// whose thread was descheduled (rxe in a TCG guest, a paused
	// process) takes nothing in until it runs again, and no run of
	// ordinary round trips predicts it.
	Stall     time.Duration
	StallRate float64
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
	Dropped, QueueDropped, Marked, Corrupted, Duplicated, Reordered, Stalled uint64
}
