package cm

import "fmt"

// State is a connection's state in the CM state machines of IBA 12.9.6
// (Figure 167... "Communication state diagram: active" and "passive").
type State uint8

// States. REP Rcvd/MRA REP Sent (active) and DREQ Rcvd (both) are not
// states here: the active side answers a REP with RTU at once, and both
// sides answer a DREQ with DREP at once, so no message can arrive in them.
const (
	// StateIdle: no connection (never started, closed, or after time-wait).
	StateIdle State = iota
	// Active side.
	StateREQSent // REQ sent, retrying until a REP, MRA or REJ
	StateREPWait // the passive side MRAed the REQ: no more retries, a longer wait
	// Passive side.
	StateREQRcvd    // REQ delivered to the application, which has not answered
	StateMRAREQSent // as REQRcvd, and an MRA told the active side to wait
	StateREPSent    // REP sent, retrying until an RTU (or first data)
	StateMRAREPRcvd // the active side MRAed the REP: no more retries, a longer wait
	// Both.
	StateEstablished
	StateDREQSent // DREQ sent, retrying until a DREP or the peer's DREQ
	// StateTimewait: the connection is down; its IDs and QPN stay reserved
	// so late packets and MADs of it cannot be taken for a new one (IBA
	// 12.9.8.3.1 "Time Wait"); duplicate DREQs get a DREP, duplicate
	// REQs a REJ.
	StateTimewait
)

var stateNames = [...]string{
	StateIdle:        "Idle",
	StateREQSent:     "REQ Sent",
	StateREPWait:     "REP Wait",
	StateREQRcvd:     "REQ Rcvd",
	StateMRAREQSent:  "MRA(REQ) Sent",
	StateREPSent:     "REP Sent",
	StateMRAREPRcvd:  "MRA(REP) Rcvd",
	StateEstablished: "Established",
	StateDREQSent:    "DREQ Sent",
	StateTimewait:    "Timewait",
}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Connecting reports whether the connection is on its way up.
func (s State) Connecting() bool { return s >= StateREQSent && s <= StateMRAREPRcvd }

// Connected reports whether the QP may carry traffic: established, or
// passive with the REP sent (its QP is in RTS and the first data counts
// as the RTU).
func (s State) Connected() bool {
	return s == StateEstablished || s == StateREPSent || s == StateMRAREPRcvd
}
