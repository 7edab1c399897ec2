package cm

import "github.com/uroce/uroce/pkg/cm/mad"

// Address is where a MAD goes or came from: a port's GID and, on it, QP1
// with the GSI Q_Key. The verbs layer turns it into a UD address vector
// (on RoCEv2 the GID is the peer's IP address) and a DETH.
type Address struct {
	GID  mad.GID
	QPN  uint32 // mad.GSIQPN for CM traffic
	QKey uint32 // mad.GSIQKey
	PKey uint16 // 0xffff, the default partition
}

// gsiAddress returns the address of QP1 on the port with this GID.
func gsiAddress(g mad.GID) Address {
	return Address{GID: g, QPN: mad.GSIQPN, QKey: mad.GSIQKey, PKey: 0xffff}
}

// MADSender sends one 256-byte MAD as a UD SEND Only from QP1 to dst.
// The manager reuses b after the call returns, so SendMAD copies it (or
// finishes with it) before returning. An error counts as a lost datagram:
// the manager's retries cover REQ, REP and DREQ, and duplicates of the
// peer's message bring the others (RTU, MRA, REJ, DREP) again. SendMAD must
// not call back into the Manager.
type MADSender interface {
	SendMAD(dst Address, b []byte) error
}
