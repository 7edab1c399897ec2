// Package mmsg batches datagrams through recvmmsg(2) and sendmmsg(2)
// without allocating: a Batch owns its message headers, iovecs, address
// slots and control buffers, made once, and points each iovec at a buffer
// the caller owns for as long as it is in the batch.
//
// One goroutine uses a Batch at a time; the backends that embed one own it
// from their engine loop.
package mmsg
