package qp

// StateChange is a QP's move from one state to another, as the engine
// reports it to Engine.OnStateChange.
type StateChange struct {
	QP       *QP
	From, To QPState
	// ByModify is true when Modify made the move, false when the engine
	// moved the QP to ERR on an error.
	ByModify bool
	// Failed is true when a send WR's failure moved the QP to ERR; Status
	// and WRID are that WR's (a responder's error, answered with a NAK,
	// moves it without one).
	Failed bool
	Status WCStatus
	WRID   uint64
}

// stateChanged reports a move to OnStateChange. It runs only on state
// changes, never per packet.
func (e *Engine) stateChanged(q *QP, from, to QPState, byModify bool) {
	if e.OnStateChange == nil || from == to {
		return
	}
	c := StateChange{QP: q, From: from, To: to, ByModify: byModify}
	if !byModify {
		// fail set the WQE's status before the flush marks the rest:
		// the first WQE with an error is the one that failed.
		for i := q.sq.head; i != q.sq.tail; i++ {
			if w := q.sq.at(i); w.status != WCSuccess {
				c.Failed, c.Status, c.WRID = true, w.status, w.wr.ID
				break
			}
		}
	}
	e.OnStateChange(&c)
}
