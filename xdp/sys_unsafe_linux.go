package xdp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setsockoptPtr and getsockoptPtr pass kernel structs that x/sys/unix has
// types for (XDPUmemReg, XDPMmapOffsets, XDPStatistics) but no helpers.
func setsockoptPtr(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptPtr(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func registerUMEM(fd int, mem []byte, frameSize, headroom int) error {
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Len:      uint64(len(mem)),
		Size:     uint32(frameSize),
		Headroom: uint32(headroom),
	}
	return setsockoptPtr(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg))
}

func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	err := getsockoptPtr(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off))
	return off, err
}

func statistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	err := getsockoptPtr(fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st, err
}

// mapRing mmaps one ring of n entries of T at page offset pgoff and points
// r's fields into the mapping. The mapping is returned for munmap.
func mapRing[T any](fd int, pgoff int64, off unix.XDPRingOffset, n uint32, r *ring[T]) ([]byte, error) {
	var zero T
	size := int(off.Desc) + int(n)*int(unsafe.Sizeof(zero))
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	r.producer = (*uint32)(unsafe.Pointer(&mem[off.Producer]))
	r.consumer = (*uint32)(unsafe.Pointer(&mem[off.Consumer]))
	r.flags = (*uint32)(unsafe.Pointer(&mem[off.Flags]))
	r.entries = unsafe.Slice((*T)(unsafe.Pointer(&mem[off.Desc])), n)
	r.size = n
	r.mask = n - 1
	return mem, nil
}

// kick makes a sendto(2) with no data: in copy mode it transmits what TX
// holds; in zero-copy mode it wakes the driver. Raw syscall: unix.Sendto
// would build a sockaddr. With MSG_DONTWAIT it never sleeps, so it is made
// without telling the scheduler (RawSyscall6), which saves the
// entersyscall/exitsyscall pair on every transmit batch.
func kick(fd int) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// recvWake makes a recvfrom(2) with no buffer: it wakes a zero-copy driver
// whose Fill ring ran dry and, with busy polling, runs the device's NAPI
// once (a non-blocking socket's busy loop makes one pass), so it too is a
// RawSyscall6.
func recvWake(fd int) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}
