package pool

import "github.com/uroce/uroce/pkg/link"

// Pool is a stack of free packet buffers.
type Pool struct {
	free []*link.Packet
	size int
}

// New makes n buffers of size bytes each, all free.
func New(n, size int) *Pool {
	slab := make([]byte, n*size)
	pk := make([]link.Packet, n)
	p := &Pool{free: make([]*link.Packet, 0, n), size: size}
	for i := range pk {
		// Capped, so a packet can never grow into its neighbour.
		pk[i].Buf = slab[i*size : (i+1)*size : (i+1)*size]
		p.free = append(p.free, &pk[i])
	}
	return p
}

// Size returns the length of each buffer.
func (p *Pool) Size() int { return p.size }

// Len returns how many buffers are free.
func (p *Pool) Len() int { return len(p.free) }

// Alloc fills pkts with free buffers reset to empty transmit packets (Off =
// link.Headroom, everything else zero) and returns how many it could.
func (p *Pool) Alloc(pkts []*link.Packet) int {
	n := 0
	for n < len(pkts) && len(p.free) > 0 {
		pk := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		*pk = link.Packet{Buf: pk.Buf, Off: link.Headroom}
		pkts[n] = pk
		n++
	}
	return n
}

// Get takes one free buffer as it is (for posting to a receive slot), or
// returns nil when none is free.
func (p *Pool) Get() *link.Packet {
	if len(p.free) == 0 {
		return nil
	}
	pk := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return pk
}

// Put returns one buffer.
func (p *Pool) Put(pk *link.Packet) { p.free = append(p.free, pk) }

// Release returns every non-nil packet of pkts and clears its slot, so the
// caller keeps no reference to a buffer it gave back.
func (p *Pool) Release(pkts []*link.Packet) {
	for i, pk := range pkts {
		if pk != nil {
			p.free = append(p.free, pk)
			pkts[i] = nil
		}
	}
}

// Split hands pkts to send in runs of at most max (one system call's
// batch) and returns the total sent and the first error.
func Split(pkts []*link.Packet, max int, send func([]*link.Packet) (int, error)) (int, error) {
	sent := 0
	var first error
	for len(pkts) > 0 {
		k := min(len(pkts), max)
		n, err := send(pkts[:k])
		sent += n
		if err != nil && first == nil {
			first = err
		}
		pkts = pkts[k:]
	}
	return sent, first
}
