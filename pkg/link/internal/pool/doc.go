// Package pool is the free list of packet buffers that the socket backends
// (udp, afpacket) and the pipe hand out through Alloc and take back through
// Release: a fixed number of equal buffers cut from one slab at open, kept
// on a stack so the most recently used (cache-warm) buffer goes out first.
//
// A Pool is not safe for concurrent use; it belongs to the link's owner (the
// pipe guards its shared pool with its own mutex). Nothing in it allocates
// after New.
package pool
