package afxdp

import "unsafe"

// offsetIn returns where b starts inside mem, or -1 if it does not start
// inside mem. It is how Send and Release find the UMEM frame behind a
// packet's buffer without a lookup table.
func offsetIn(mem, b []byte) int {
	if len(mem) == 0 || cap(b) == 0 {
		return -1
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p >= base+uintptr(len(mem)) {
		return -1
	}
	return int(p - base)
}
