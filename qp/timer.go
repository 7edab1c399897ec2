package qp

import "time"

type timerKind uint8

const (
	timerRetrans timerKind = iota // local ACK timeout (IBA 9.7.6.1.3)
	timerRNR                      // RNR NAK wait (IBA 9.7.5.2.8)
	timerCC                       // the congestion control algorithm's timer
	timerPace                     // the pacer will have tokens for the requester
)

// timer is one QP timer, embedded in the QP; idx is its place in the heap
// or -1, so arming, moving and stopping are O(log n) with no allocation.
type timer struct {
	when time.Time
	qp   *QP
	idx  int32
	kind timerKind
}

// timerHeap is a min-heap of armed timers by deadline.
type timerHeap []*timer

func (h timerHeap) less(i, j int) bool { return h[i].when.Before(h[j].when) }

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = int32(i)
	h[j].idx = int32(j)
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *timerHeap) set(t *timer, when time.Time) {
	t.when = when
	if t.idx >= 0 {
		(*h).up(int(t.idx))
		(*h).down(int(t.idx))
		return
	}
	t.idx = int32(len(*h))
	*h = append(*h, t)
	(*h).up(int(t.idx))
}

func (h *timerHeap) remove(t *timer) {
	i := int(t.idx)
	if i < 0 {
		return
	}
	last := len(*h) - 1
	if i != last {
		(*h).swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	t.idx = -1
	if i != last {
		(*h).down(i)
		(*h).up(i)
	}
}
