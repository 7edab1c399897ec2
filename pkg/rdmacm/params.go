package rdmacm

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// Params are a side's connection parameters (rdma_conn_param). Zero
// fields take the values rping and perftest use.
type Params struct {
	// PrivateData goes to the peer: at most 56 bytes in Dial's REQ (rdma_cm's
	// header takes the rest), 196 in Accept's REP.
	PrivateData []byte
	// ResponderResources: RDMA READ/atomic this side answers at once;
	// InitiatorDepth: those it has outstanding. 0 means 1; the passive
	// side's are capped by the REQ's offer, as rdma_accept's are.
	ResponderResources, InitiatorDepth uint8
	// RetryCount and RNRRetryCount (3 bits each; 7 retries forever, as
	// rxe reads both): 0 means 7.
	RetryCount, RNRRetryCount uint8
	// FlowControl advertises end-to-end credits (IBA 9.7.7.2).
	FlowControl bool
	// PathMTU in bytes caps the path MTU (Dial only; the passive side
	// takes the REQ's, capped by its link); 0 means the device's largest.
	PathMTU int
	// PSN is the first PSN the QP receives (the peer's send queue starts
	// there; ib_cm's meaning of a Starting PSN); 0 picks a random one, as
	// rdma_cm does.
	PSN uint32
	// Access is the remote access the QP grants; 0 means local write,
	// remote write, remote read and remote atomic.
	Access verbs.Access
	// LocalPort is the source port Dial puts in rdma_cm's header; 0 picks
	// an ephemeral one.
	LocalPort uint16
	// GoBackN keeps the connection to RC's go-back-N even when the peer
	// is uroce. By default Dial offers uroce's selective repeat and
	// Accept takes it when offered, in bits of the REQ and REP that
	// ib_cm ignores: it is on (both QPs' Retrans has RetransSelective,
	// Conn.Attr().SelectiveRepeat) exactly when both ends are uroce and
	// neither gave GoBackN, and with rxe or ConnectX never.
	GoBackN bool
	// Retrans are the QP's other retransmission flags (RetransFixed,
	// RetransRetry7Forever), given at RTR; rdma_cm's parameters have no
	// such field. RetransSelective here is ignored: the exchange decides
	// it (GoBackN).
	Retrans verbs.RetransFlags
}

func (p *Params) withDefaults() Params {
	var q Params
	if p != nil {
		q = *p
	}
	def := func(v *uint8, d uint8) {
		if *v == 0 {
			*v = d
		}
	}
	def(&q.ResponderResources, 1)
	def(&q.InitiatorDepth, 1)
	def(&q.RetryCount, 7)
	def(&q.RNRRetryCount, 7)
	if q.PSN == 0 {
		q.PSN = verbs.RandomPSN()
	}
	q.PSN &= 0xffffff
	if q.Access == 0 {
		q.Access = defaultAccess
	}
	if q.LocalPort == 0 {
		// rdma_cm's ephemeral range is the kernel's
		// ip_local_port_range; any high port serves.
		q.LocalPort = uint16(32768 + rand.IntN(28232))
	}
	return q
}

// The Modify QP masks of each transition (ibv_modify_qp's, as rdma_cm's
// rdma_init_qp_attr fills them).
const (
	attrState = verbs.AttrState
	attrInit  = verbs.AttrState | verbs.AttrAccessFlags | verbs.AttrPKeyIndex | verbs.AttrPort
	attrRTR   = verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN |
		verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer
	attrRTS = verbs.AttrState | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrSQPSN |
		verbs.AttrMaxQPRdAtomic
)

// InitQP takes a new QP from RESET to INIT with the given remote access
// (0: local write, remote write, remote read, remote atomic), as
// rdma_create_qp does for an rdma_cm ID, so receives can be posted before
// Dial or Accept: the peer may send the moment the connection is up, and
// a SEND that finds no receive waits out an RNR NAK. Dial and Accept do
// it themselves for a QP still in RESET.
func InitQP(q *verbs.QueuePair, access verbs.Access) error {
	if access == 0 {
		access = defaultAccess
	}
	return initQP(q, access)
}

const defaultAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

// initQP takes a caller's QP from RESET to INIT; a QP already in INIT
// keeps its access rights.
func initQP(q *verbs.QueuePair, access verbs.Access) error {
	if q == nil {
		return nil
	}
	switch s := q.State(); s {
	case verbs.StateInit:
		return nil
	case verbs.StateReset:
		return q.Modify(&verbs.QPAttr{State: verbs.StateInit, AccessFlags: access}, attrInit)
	default:
		return fmt.Errorf("QP %#x in %v: %w: want RESET or INIT", q.QPN(), s, ErrBadParam)
	}
}

// wrapState maps the state machines' errors to this package's.
func wrapState(op string, err error) error {
	switch {
	case errors.Is(err, cm.ErrBadState):
		return fmt.Errorf("%s: %w: %w", op, ErrBadState, err)
	case errors.Is(err, cm.ErrBadParam):
		return fmt.Errorf("%s: %w: %w", op, ErrBadParam, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// mtu returns the IB MTU code of a byte size, capped by the link's.
func mtu(want, link int) mad.MTU {
	if want == 0 || want > link {
		want = link
	}
	return mad.MTUFromBytes(want)
}
