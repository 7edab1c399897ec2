package qp

import "fmt"

// SRQConfig holds the capacities of a new shared receive queue
// (ibv_srq_init_attr): the PD of the QPs that may use it, how many WRs and
// SGEs per WR it holds, and the limit, which armed at creation when not 0.
type SRQConfig struct {
	PD     uint32
	MaxWR  int
	MaxSGE int // 0 means 1
	Limit  int
}

// SRQAttr are an SRQ's attributes (ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	// Limit is the armed limit: when a WQE is taken and fewer than
	// Limit remain, the engine raises EventSRQLimitReached once and
	// disarms it (Limit becomes 0; IBA 10.2.9.2, 11.6.3). 0 is disarmed.
	Limit int
}

// SRQAttrMask says which fields of an SRQAttr a Modify sets
// (ibv_srq_attr_mask).
type SRQAttrMask uint8

// SRQ attribute mask bits, rdma-core's values.
const (
	SRQMaxWR SRQAttrMask = 1 << 0
	SRQLimit SRQAttrMask = 1 << 1
)

// SRQ is a shared receive queue (ibv_srq): receive WRs that every QP
// created with it takes in turn, as messages arrive. Like a QP it belongs
// to its engine's owner.
type SRQ struct {
	e     *Engine
	cfg   SRQConfig
	rq    recvQueue
	limit uint32
	refs  int
	gone  bool
	// Counters count what happened on the queue.
	Counters SRQCounters
}

// SRQCounters count an SRQ's WRs and events.
type SRQCounters struct {
	Posted, Taken uint64
	// LimitEvents counts EventSRQLimitReached raised.
	LimitEvents uint64
}

// AsyncEventType is the type of an asynchronous event (ibv_event_type),
// with rdma-core's values.
type AsyncEventType uint8

// Asynchronous events: the one the engine raises, and the port's, which
// the device that follows the port's interface raises.
const (
	EventPortActive      AsyncEventType = 9
	EventPortErr         AsyncEventType = 10
	EventSRQLimitReached AsyncEventType = 15
)

func (t AsyncEventType) String() string {
	switch t {
	case EventPortActive:
		return "port active"
	case EventPortErr:
		return "port error"
	case EventSRQLimitReached:
		return "SRQ limit reached"
	}
	return "unknown event"
}

// AsyncEvent is an asynchronous event (ibv_async_event): its type and the
// object it concerns.
type AsyncEvent struct {
	Type AsyncEventType
	SRQ  *SRQ
	QP   *QP
}

// CreateSRQ makes a shared receive queue. It returns ErrBadAttr for a
// zero capacity or a limit beyond it.
func (e *Engine) CreateSRQ(cfg SRQConfig) (*SRQ, error) {
	if cfg.MaxWR < 1 || cfg.MaxSGE < 0 || cfg.Limit < 0 || cfg.Limit > cfg.MaxWR {
		return nil, fmt.Errorf("create SRQ: %w: max_wr %d, max_sge %d, limit %d", ErrBadAttr, cfg.MaxWR, cfg.MaxSGE, cfg.Limit)
	}
	if cfg.MaxSGE == 0 {
		cfg.MaxSGE = 1
	}
	s := &SRQ{e: e, cfg: cfg, limit: uint32(cfg.Limit)}
	n := ringSize(cfg.MaxWR)
	s.rq = recvQueue{wqes: make([]recvWQE, n), mask: uint32(n - 1), size: uint32(cfg.MaxWR)}
	for i := range s.rq.wqes {
		s.rq.wqes[i].sge = make([]SGE, 0, cfg.MaxSGE)
	}
	return s, nil
}

// DestroySRQ removes an SRQ; its WRs vanish without completions. It
// returns ErrBusy while a QP uses it.
func (e *Engine) DestroySRQ(s *SRQ) error {
	if s.e != e || s.gone {
		return fmt.Errorf("destroy SRQ: %w", ErrBadAttr)
	}
	if s.refs > 0 {
		return fmt.Errorf("destroy SRQ: %w: %d QPs use it", ErrBusy, s.refs)
	}
	s.gone = true
	return nil
}

// Attr returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Attr() SRQAttr {
	return SRQAttr{MaxWR: s.cfg.MaxWR, MaxSGE: s.cfg.MaxSGE, Limit: int(s.limit)}
}

// Len returns how many receive WRs the SRQ holds.
func (s *SRQ) Len() int { return int(s.rq.tail - s.rq.head) }

// Modify arms the limit (ibv_modify_srq with IBV_SRQ_LIMIT). Resizing
// (SRQMaxWR) is not supported: ErrBadAttr, as for a limit beyond MaxWR.
func (s *SRQ) Modify(a *SRQAttr, mask SRQAttrMask) error {
	if mask&^SRQLimit != 0 {
		return fmt.Errorf("modify SRQ: %w: mask %#x (only the limit can change)", ErrBadAttr, uint8(mask))
	}
	if mask&SRQLimit != 0 {
		if a.Limit < 0 || a.Limit > s.cfg.MaxWR {
			return fmt.Errorf("modify SRQ: %w: limit %d of %d", ErrBadAttr, a.Limit, s.cfg.MaxWR)
		}
		s.limit = uint32(a.Limit)
	}
	return nil
}

// PostRecv queues a receive WR on the SRQ. It returns ErrQueueFull when
// MaxWR WRs are queued and ErrBadWR for too many SGEs.
func (s *SRQ) PostRecv(wr *RecvWR) error {
	r := &s.rq
	if r.tail-r.head >= r.size {
		return fmt.Errorf("post SRQ recv: %w", ErrQueueFull)
	}
	w := &r.wqes[r.tail&r.mask]
	if len(wr.SGL) > cap(w.sge) {
		return fmt.Errorf("post SRQ recv: %w: %d SGEs, max %d", ErrBadWR, len(wr.SGL), cap(w.sge))
	}
	w.set(wr)
	r.tail++
	s.Counters.Posted++
	return nil
}

// take moves the SRQ's oldest WQE into q's own slot (as rxe's get_srq_wqe
// copies it out), raising the limit event when fewer than the armed limit
// remain. It reports false when the SRQ is empty.
func (s *SRQ) take(q *QP) bool {
	r := &s.rq
	if r.head == r.tail {
		return false
	}
	src := &r.wqes[r.head&r.mask]
	dst := &q.srqWQE
	dst.id, dst.length = src.id, src.length
	dst.sge = append(dst.sge[:0], src.sge...)
	dst.mrs = dst.mrs[:0]
	r.head++
	s.Counters.Taken++
	if s.limit > 0 && r.tail-r.head < s.limit {
		s.limit = 0
		s.Counters.LimitEvents++
		if s.e.OnAsyncEvent != nil {
			s.e.OnAsyncEvent(AsyncEvent{Type: EventSRQLimitReached, SRQ: s})
		}
	}
	return true
}

// peekRecv returns the receive WQE the next message would take, without
// taking it, or nil.
func (q *QP) peekRecv() *recvWQE {
	r := &q.rq
	if q.srq != nil {
		r = &q.srq.rq
	}
	if r.head == r.tail {
		return nil
	}
	return &r.wqes[r.head&r.mask]
}

// takeRecv makes the next receive WQE the one in progress (recvWQE) and
// reports false when there is none.
func (q *QP) takeRecv() bool {
	if q.srq != nil {
		return q.srq.take(q)
	}
	if q.rq.head == q.rq.tail {
		return false
	}
	w := &q.rq.wqes[q.rq.head&q.rq.mask]
	w.mrs = w.mrs[:0]
	return true
}

// recvWQE returns the receive WQE in progress: the one taken from the SRQ,
// or the head of the QP's own queue.
func (q *QP) recvWQE() *recvWQE {
	if q.srq != nil {
		return &q.srqWQE
	}
	return &q.rq.wqes[q.rq.head&q.rq.mask]
}

// retireRecv ends the receive WQE in progress.
func (q *QP) retireRecv() {
	if q.srq == nil {
		q.rq.head++
	}
}
