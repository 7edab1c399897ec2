package pipe

// heap is a binary min-heap of flights by delivery time, then send order.
// It is written out (not container/heap) so pushes do not box values.
type heap []flight

func (h heap) less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}

func (h *heap) push(f flight) {
	*h = append(*h, f)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *heap) pop() flight {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = flight{}
	q = q[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
