// Package waiter is how a link's owner sleeps and how Close, from any
// goroutine, stops the owner without a lock on the data path.
//
// The design gives a link one owner, the engine loop, so the data path
// (Alloc, Send, Recv, Release, Wait) needs no mutual exclusion; only Close
// may come from elsewhere, to end a Wait, and it must not free a socket or
// a UMEM the owner is still using (a closed descriptor number is reused by
// the next open, so a late sendmmsg could go out on someone else's socket).
// A Waiter settles that with one word of state: the owner marks itself busy
// on entry to a call and idle on exit (a compare-and-swap each, on a cache
// line only it writes: what an uncontended RWMutex read lock costs, but
// nothing ever blocks the owner, and a second goroutine on the data path
// is caught instead of corrupting the buffers); Close marks the word
// closing and, if the owner is busy, wakes it through the eventfd that
// Wait also polls and waits for the owner's exit to hand over. Only then does the link free its resources. The owner
// never waits for Close, and Close waits at most for one call to finish.
//
// Wait parks the goroutine in the Go runtime's poller on an epoll instance
// that watches the link's descriptors and the eventfd, so that a sleeping
// owner holds no thread; where the runtime does not take the instance,
// Wait is ppoll(2) on the same descriptors.
package waiter
