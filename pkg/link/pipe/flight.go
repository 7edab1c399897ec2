package pipe

import (
	"math/rand/v2"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/pool"
	"github.com/uroce/uroce/pkg/netem"
)

// flight is a packet in the pipe: the netem.Packet its direction carries.
type flight struct {
	p    *link.Packet
	ip   int // offset of the IP header in p.Buf
	n    int // IP datagram length
	pool *pool.Pool
}

var _ netem.Packet[flight] = flight{}

func (f flight) Len() int { return f.n }

func (f flight) ECT() bool { return tos(f.p.Buf[f.ip:])&3 != link.ECNNotECT }

// MarkCE sets CE in the IP header. TOS and traffic class are masked by the
// ICRC: marking in flight leaves it valid, as a switch does.
func (f flight) MarkCE() {
	ipb := f.p.Buf[f.ip:]
	if ipb[0]>>4 == 4 {
		bth.IPv4(ipb).SetTOS(tos(ipb) | link.ECNCE)
	} else {
		bth.IPv6(ipb).SetTrafficClass(tos(ipb) | link.ECNCE)
	}
}

func tos(ipb []byte) uint8 {
	if ipb[0]>>4 == 4 {
		return bth.IPv4(ipb).TOS()
	}
	return bth.IPv6(ipb).TrafficClass()
}

// Corrupt flips one bit of the RoCE packet that the ICRC covers: any bit
// but those of BTH byte 4 (resv8a, masked).
func (f flight) Corrupt(r *rand.Rand) {
	p := f.p
	for {
		bit := r.IntN(p.Len * 8)
		if bit/8 == 4 {
			continue
		}
		p.Buf[p.Off+bit/8] ^= 1 << (bit % 8)
		return
	}
}

// Copy duplicates the datagram into a second buffer, if the pool has one.
func (f flight) Copy() (flight, bool) {
	if f.pool.Len() == 0 {
		return flight{}, false
	}
	dup := f.pool.Get()
	copy(dup.Buf, f.p.Buf[:f.ip+f.n])
	f.p = dup
	return f, true
}

func (f flight) Free() { f.pool.Put(f.p) }
