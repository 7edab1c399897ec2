package afxdp

import (
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/xdp"
)

// The methods below let a caller do per-packet work on a Raw endpoint
// (rawbench's RC-shaped floor re-stamps and checks every frame) while the
// endpoint still moves nothing but descriptors: frames are built in place
// in transmit spans and read in place in the receive chunks.

// Spans returns how many transmit spans the endpoint has.
func (r *Raw) Spans() int { return r.spans }

// Span returns transmit span i (0 ≤ i < Spans()), as large as the largest
// frame the interface's MTU allows, for the caller to build a frame in.
// A span must not be rewritten while a frame queued from it may still be
// in flight; a ping-pong that waits for its reply never does.
func (r *Raw) Span(i int) []byte {
	a := r.spanBase + i*r.spanSize
	return r.sock.UMEM()[a : a+r.spanSize]
}

// QueueSpan queues the first n bytes of span i as one frame; false if TX
// is full. Flush sends what is queued.
func (r *Raw) QueueSpan(i, n int) bool { return r.queueSpan(i, n) }

// Flush hands queued frames to the kernel and recycles completed ones.
func (r *Raw) Flush() error { return r.flush() }

// Wait waits for received frames, as the ping-pong does: false when stop
// (if not nil) is set or deadline (if not zero) passes first.
func (r *Raw) Wait(stop *atomic.Bool, deadline time.Time) bool { return r.wait(stop, deadline) }

// Receive hands each received frame to fn and recycles its chunks. A
// frame in one chunk is passed in place; a multi-buffer frame is gathered
// into a scratch buffer first. fn must not keep the bytes. It returns the
// number of frames.
func (r *Raw) Receive(fn func(frame []byte)) int {
	u := r.sock.UMEM()
	n := r.sock.RX.Consume(r.rx[:])
	frames := 0
	for _, d := range r.rx[:n] {
		b := u[d.Addr : d.Addr+uint64(d.Len)]
		r.fill = append(r.fill, d.Addr&^uint64(r.fs-1))
		if d.Options&xdp.OptContinued != 0 {
			r.gather = append(r.gather, b...)
			continue
		}
		if len(r.gather) > 0 {
			r.gather = append(r.gather, b...)
			b = r.gather
		}
		r.rxPackets++
		frames++
		fn(b)
		r.gather = r.gather[:0]
	}
	r.postFill()
	return frames
}
