package rsocket

import "unsafe"

// addrOf is buf's address, the offset riomap picks when given -1.
func addrOf(buf []byte) int64 { return int64(uintptr(unsafe.Pointer(&buf[0]))) }
