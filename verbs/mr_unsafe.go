package verbs

import "unsafe"

// addrOf returns the virtual address of a slice's first byte: an MR's
// address is where its memory really is, as with ibv_reg_mr, so peers can
// exchange plain pointers. Go's collector does not move heap objects, and
// the MR keeps the slice reachable.
func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
