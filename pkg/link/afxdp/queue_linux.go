package afxdp

import (
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/xdp"
)

const (
	rxBatch   = 64 // RX descriptors taken per ring read; must be >= xdp.MaxFrags
	compBatch = 256
)

// queue is one AF_XDP socket and the bookkeeping of its UMEM: receive
// chunks [0, rxChunks) and transmit spans from spanBase on.
type queue struct {
	id   int
	sock *xdp.Socket
	umem []byte
	fs   int

	rxChunks int
	rxOut    []bool        // chunk handed to the user (not on Fill)
	rxPkts   []link.Packet // the Packet handed out for each chunk
	fillq    []uint64      // chunks to post on Fill

	spanBase   int
	spanSize   int
	spanChunks int
	free       []int32 // stack of free spans
	spanOut    []bool  // span handed out (Alloc, or a received chain)
	pending    []uint16
	spanPkts   []link.Packet

	rx          [rxBatch]xdp.Desc
	rxHead, rxN int
	comp        [compBatch]uint64
	tx          []xdp.Desc
	txFree      int
}

func newQueue(id int, sock *xdp.Socket, rxChunks, spanChunks, spans int) *queue {
	fs := sock.FrameSize()
	q := &queue{
		id: id, sock: sock, umem: sock.UMEM(), fs: fs,
		rxChunks: rxChunks, rxOut: make([]bool, rxChunks), rxPkts: make([]link.Packet, rxChunks),
		fillq:    make([]uint64, 0, rxChunks),
		spanBase: rxChunks * fs, spanSize: spanChunks * fs, spanChunks: spanChunks,
		free: make([]int32, 0, spans), spanOut: make([]bool, spans), pending: make([]uint16, spans),
		spanPkts: make([]link.Packet, spans),
		tx:       make([]xdp.Desc, 0, sock.TX.Size()),
	}
	for s := spans - 1; s >= 0; s-- {
		q.free = append(q.free, int32(s))
	}
	for c := range rxChunks {
		q.fillq = append(q.fillq, uint64(c*fs))
	}
	q.postFill()
	return q
}

// postFill gives recycled chunks back to the kernel. Fill holds every
// receive chunk, so it never refuses one.
func (q *queue) postFill() {
	if len(q.fillq) == 0 {
		return
	}
	n := q.sock.Fill.Produce(q.fillq)
	m := copy(q.fillq, q.fillq[n:])
	q.fillq = q.fillq[:m]
	if q.sock.Fill.NeedWakeup() {
		q.sock.WakeRX()
	}
}

func (q *queue) recycleChunk(addr uint64) {
	q.fillq = append(q.fillq, addr&^uint64(q.fs-1))
}

func (q *queue) span(s int) []byte {
	o := q.spanBase + s*q.spanSize
	return q.umem[o : o+q.spanSize : o+q.spanSize]
}

func (q *queue) popSpan() int {
	if len(q.free) == 0 {
		q.reap()
		if len(q.free) == 0 {
			return -1
		}
	}
	s := int(q.free[len(q.free)-1])
	q.free = q.free[:len(q.free)-1]
	q.spanOut[s] = true
	return s
}

func (q *queue) freeSpan(s int) {
	q.spanOut[s] = false
	q.free = append(q.free, int32(s))
}

// reap takes completed transmit descriptors: a span is free once all of
// its descriptors are back; a receive chunk that was sent goes to Fill.
func (q *queue) reap() {
	for {
		n := q.sock.Completion.Consume(q.comp[:])
		for _, a := range q.comp[:n] {
			if int(a) < q.spanBase {
				q.recycleChunk(a)
				continue
			}
			s := (int(a) - q.spanBase) / q.spanSize
			if q.pending[s]--; q.pending[s] == 0 {
				q.freeSpan(s)
			}
		}
		if n < len(q.comp) {
			return
		}
	}
}

// release takes back a buffer at UMEM offset off that was handed out by
// Alloc or Recv. Unknown or repeated releases are ignored.
func (q *queue) release(off int) {
	if off < q.spanBase {
		c := off / q.fs
		if q.rxOut[c] {
			q.rxOut[c] = false
			q.rxPkts[c].Buf = nil
			q.fillq = append(q.fillq, uint64(c*q.fs))
		}
		return
	}
	s := (off - q.spanBase) / q.spanSize
	if s < len(q.spanOut) && q.spanOut[s] && q.pending[s] == 0 {
		q.spanPkts[s].Buf = nil
		q.freeSpan(s)
	}
}

// queueTX appends the descriptors of one frame at UMEM offset start, cut at
// chunk boundaries (the kernel refuses a descriptor that crosses one in
// aligned mode) and chained with XDP_PKT_CONTD. It returns false, queueing
// nothing, if the TX ring lacks room.
func (q *queue) queueTX(start, n int) bool {
	first := start / q.fs
	last := (start + n - 1) / q.fs
	nd := last - first + 1
	if nd > q.txFree {
		q.reap()
		q.txFree = q.sock.TX.Free() - len(q.tx)
		if nd > q.txFree {
			return false
		}
	}
	for a, left := start, n; left > 0; {
		l := min(left, (a/q.fs+1)*q.fs-a)
		d := xdp.Desc{Addr: uint64(a), Len: uint32(l)}
		if l < left {
			d.Options = xdp.OptContinued
		}
		q.tx = append(q.tx, d)
		a, left = a+l, left-l
	}
	q.txFree -= nd
	if start >= q.spanBase {
		s := (start - q.spanBase) / q.spanSize
		q.pending[s] += uint16(nd)
	}
	return true
}

// flushTX publishes queued descriptors and kicks the kernel if it asks.
func (q *queue) flushTX() error {
	if len(q.tx) == 0 {
		return nil
	}
	n := q.sock.TX.Produce(q.tx)
	// queueTX reserved the room, so n == len(q.tx).
	q.tx = q.tx[:copy(q.tx, q.tx[n:])]
	err := q.sock.Kick()
	q.reap()
	return err
}
