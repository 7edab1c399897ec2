package verbs

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// AllocMR maps size bytes of anonymous memory (rounded up to whole pages,
// outside the Go heap: never scanned or moved by the collector, like a
// buffer an RDMA application would register with ibv_reg_mr) and
// registers it with the access flags. MR.Buf is the memory.
//
// Dereg stops the keys at once, but the memory stays mapped until the
// device closes: a work request still in flight may hold the region, and
// it must find memory there, never an unmapped page. Use RegMR with a Go
// slice for regions that come and go often.
func (pd *PD) AllocMR(size int, access Access) (*MR, error) {
	if size <= 0 {
		return nil, fmt.Errorf("alloc MR: %w: size %d", ErrBadWR, size)
	}
	page := unix.Getpagesize()
	n := (size + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("alloc MR: mmap %d bytes: %w", n, err)
	}
	m, err := pd.RegMR(mem[:size], access)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	d := pd.d
	d.startMu.Lock()
	d.mapped = append(d.mapped, mem)
	d.startMu.Unlock()
	return m, nil
}

// unmapAll releases the memory of AllocMR once no goroutine can reach the
// engine: the device is closed and its owner word is free. If the owner
// does not let go (it would be a bug), the memory is left mapped: a leak
// is better than a fault under a copy.
func (d *Device) unmapAll() {
	d.startMu.Lock()
	mapped := d.mapped
	d.mapped = nil
	d.startMu.Unlock()
	if len(mapped) == 0 {
		return
	}
	for deadline := time.Now().Add(time.Second); d.owner.Load() != 0; {
		if time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
	for _, mem := range mapped {
		unix.Munmap(mem)
	}
}
