package main

import (
	"sync/atomic"
	"unsafe"
)

// loadByte reads buf[i] with an atomic load of the aligned word that
// holds it, so a loop polling for the peer's RDMA WRITE sees it land
// (riostream polls a volatile byte).
func loadByte(buf []byte, i int) byte {
	w := (*uint32)(unsafe.Pointer(&buf[i&^3]))
	return byte(atomic.LoadUint32(w) >> (8 * (i & 3)))
}
