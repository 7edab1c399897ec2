package cm

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// Defaults, as rdma_cm and rxe use them (and the captures show).
const (
	// DefaultCMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT: 2^20 × 4.096 µs
	// ≈ 4.3 s for either side to answer a CM message.
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// DefaultTargetACKDelay is rxe's local CA ACK delay (the REP's Target
	// ACK Delay in the captures).
	DefaultTargetACKDelay = 15
	// DefaultPacketLifetime is the packet lifetime exponent the Debian 12
	// kernel gives RoCE paths (the captured REQs' Local ACK Timeout 19 is
	// cm_ack_timeout(15, 18)).
	DefaultPacketLifetime = 18
	// DefaultMRAServiceTimeout is the service timeout of the MRA the
	// passive side sends when a REQ is repeated before the application
	// answered (CMA_CM_MRA_SETTING's 24: about a minute).
	DefaultMRAServiceTimeout = 24
	// DefaultMaxConns bounds the connections a manager holds, in any
	// state: a few tens of MB of state at most.
	DefaultMaxConns = 1 << 16
)

// Config configures a Manager. Zero fields take the defaults above.
type Config struct {
	// GID is the local port's GID, the source of REQs' primary paths.
	GID mad.GID
	// CAGUID is the local CA's GUID (rxe: the EUI-64 of the MAC).
	CAGUID uint64
	// Send and QP are how the manager reaches the verbs layer: it sends
	// MADs through Send and moves connected QPs through QP.
	Send MADSender
	QP   QPModifier
	// Seed seeds local communication IDs and transaction IDs. Give each
	// run a fresh one (from crypto/rand): a restarted node must not reuse
	// the IDs of connections its peers still remember.
	Seed uint64

	CMResponseTimeout uint8 // exponent, both directions
	MaxCMRetries      uint8 // 4 bits
	TargetACKDelay    uint8
	PacketLifetime    uint8
	MRAServiceTimeout uint8
	// MaxMTU caps the path MTU of passive connections (the port's active
	// MTU); 0 takes the REQ's.
	MaxMTU mad.MTU
	// MinRNRTimer is the RNR NAK timer code for connected QPs (0, which
	// is 655 ms, is what ib_cm gives).
	MinRNRTimer uint8
	// MaxConns bounds the connections the manager holds, whatever their
	// state; 0 means DefaultMaxConns. A REQ flood is a SYN flood: each
	// new REQ for a listened service makes a connection, which stays
	// until the application answers and then through time-wait, and
	// REQs are easy to forge. Beyond the bound a REQ is rejected with
	// "no resources" and keeps no state (Counters.Overloaded).
	MaxConns int
}

// Counters count the manager's traffic and the messages it dropped.
type Counters struct {
	MADsIn, MADsOut uint64
	SendErrors      uint64
	Retransmits     uint64
	Duplicates      uint64 // repeated messages answered (REQ, REP, DREQ, SIDR_REQ)
	Malformed       uint64
	Dropped         uint64 // unknown connection, unexpected or unsupported
	// Overloaded counts REQs rejected because MaxConns connections
	// exist.
	Overloaded uint64
}

// Manager is the connection manager of one port: listeners, connections
// and their timers. It never reads the clock: every call takes now. It is
// not safe for concurrent use: one owner (the verbs layer's engine loop)
// makes every call, as for the qp engine.
type Manager struct {
	cfg       Config
	rng       *rand.Rand
	tidHigh   uint32
	conns     map[uint32]*Conn    // by local communication ID
	remote    map[remoteKey]*Conn // by the peer's GID and communication ID
	listeners map[uint64]bool
	// Service ID resolutions: ours by Request ID, the peers' by their
	// GID and Request ID.
	sidrOut map[uint32]*SIDR
	sidrIn  map[remoteKey]*SIDR
	events  []Event
	buf     [mad.Size]byte
	// Counters count what went in and out.
	Counters Counters
}

type remoteKey struct {
	gid mad.GID
	id  uint32
}

// New returns a Manager. Send and QP are required.
func New(cfg Config) (*Manager, error) {
	if cfg.Send == nil || cfg.QP == nil {
		return nil, fmt.Errorf("new manager: nil Send or QP: %w", ErrBadParam)
	}
	def := func(v *uint8, d uint8) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.CMResponseTimeout, DefaultCMResponseTimeout)
	def(&cfg.MaxCMRetries, DefaultMaxCMRetries)
	def(&cfg.TargetACKDelay, DefaultTargetACKDelay)
	def(&cfg.PacketLifetime, DefaultPacketLifetime)
	def(&cfg.MRAServiceTimeout, DefaultMRAServiceTimeout)
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.CMResponseTimeout > 31 || cfg.MaxCMRetries > 15 || cfg.TargetACKDelay > 31 || cfg.PacketLifetime > 31 || cfg.MRAServiceTimeout > 31 {
		return nil, fmt.Errorf("new manager: timeout or retry field too wide: %w", ErrBadParam)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	return &Manager{
		cfg:       cfg,
		rng:       rng,
		tidHigh:   rng.Uint32(),
		conns:     map[uint32]*Conn{},
		remote:    map[remoteKey]*Conn{},
		listeners: map[uint64]bool{},
		sidrOut:   map[uint32]*SIDR{},
		sidrIn:    map[remoteKey]*SIDR{},
	}, nil
}

// Listen makes REQs and SIDR_REQs for serviceID turn into
// EventConnectRequest; REQs for services nobody listens on are rejected
// with "invalid service ID", SIDR_REQs answered "service ID not
// supported", as ib_cm does. It returns ErrServiceInUse for a second
// Listen.
func (m *Manager) Listen(serviceID uint64) error {
	if m.listeners[serviceID] {
		return fmt.Errorf("listen %#x: %w", serviceID, ErrServiceInUse)
	}
	m.listeners[serviceID] = true
	return nil
}

// Unlisten stops listening; connections already made are not affected.
func (m *Manager) Unlisten(serviceID uint64) { delete(m.listeners, serviceID) }

// PollEvents appends the events that happened since the last call to dst
// and returns it.
func (m *Manager) PollEvents(dst []Event) []Event {
	dst = append(dst, m.events...)
	clear(m.events)
	m.events = m.events[:0]
	return dst
}

// Conn returns the connection with a local communication ID, or nil.
func (m *Manager) Conn(localID uint32) *Conn { return m.conns[localID] }

// NumConns returns how many connections the manager holds (all but
// Idle).
func (m *Manager) NumConns() int { return len(m.conns) }

// NextDeadline returns the earliest time Tick has work to do, and false
// when no timer is running.
func (m *Manager) NextDeadline() (time.Time, bool) {
	var next time.Time
	for _, c := range m.conns {
		if !c.deadline.IsZero() && (next.IsZero() || c.deadline.Before(next)) {
			next = c.deadline
		}
	}
	for _, s := range m.sidrOut {
		if !s.deadline.IsZero() && (next.IsZero() || s.deadline.Before(next)) {
			next = s.deadline
		}
	}
	for _, s := range m.sidrIn {
		if !s.deadline.IsZero() && (next.IsZero() || s.deadline.Before(next)) {
			next = s.deadline
		}
	}
	return next, !next.IsZero()
}

// Tick runs the timers that are due at now: retransmissions, waits that
// ran out, the end of time-wait. The CM has a handful of connections per
// application, so it scans them rather than keeping a timer heap.
func (m *Manager) Tick(now time.Time) {
	var due []*Conn
	for _, c := range m.conns {
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			due = append(due, c)
		}
	}
	// In deadline order, then by ID, so that a run is the same every
	// time (map order is not): the simulator depends on it.
	slices.SortFunc(due, func(a, b *Conn) int {
		if c := a.deadline.Compare(b.deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.localID, b.localID)
	})
	for _, c := range due {
		c.expire(now)
	}
	var sdue []*SIDR
	for _, s := range m.sidrOut {
		if !s.deadline.IsZero() && !now.Before(s.deadline) {
			sdue = append(sdue, s)
		}
	}
	for _, s := range m.sidrIn {
		if !s.deadline.IsZero() && !now.Before(s.deadline) {
			sdue = append(sdue, s)
		}
	}
	slices.SortFunc(sdue, func(a, b *SIDR) int {
		if c := a.deadline.Compare(b.deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.requestID, b.requestID)
	})
	for _, s := range sdue {
		s.expire(now)
	}
}

// HandleMAD processes one datagram that arrived on QP1 from src (the
// packet's source GID and the DETH's source QP). It never panics and
// never lets a bad MAD disturb a connection; the error says why a MAD was
// dropped (wrapping ErrMalformed, ErrUnknownConn, ErrUnexpected or
// ErrUnsupported) and is for counting, not for acting on.
func (m *Manager) HandleMAD(now time.Time, src Address, b []byte) error {
	m.Counters.MADsIn++
	msg, err := mad.DecodeCM(b)
	if err != nil {
		m.Counters.Malformed++
		if errors.Is(err, mad.ErrBadClassVersion) && len(b) == mad.Size &&
			mad.MAD(b).Header().AttrID() == mad.AttrREQ {
			// IBA 12.11: a REQ of a class version we do not speak is
			// answered with REJ "unsupported class version". Only the
			// local comm ID, the first field of every version, is read.
			m.rejectREQ(src, mad.MAD(b), mad.RejInvalidClassVersion)
		}
		if errors.Is(err, mad.ErrBadClassVersion) && len(b) == mad.Size &&
			mad.MAD(b).Header().AttrID() == mad.AttrSIDRREQ {
			// IBA 12.11.2: likewise a SIDR_REP with status
			// "unsupported class version"; only the Request ID and
			// service ID are read.
			m.answerSIDR(src, mad.MAD(b), mad.SIDRBadClassVersion)
		}
		return fmt.Errorf("handle MAD: %w: %w", ErrMalformed, err)
	}
	err = m.dispatch(now, src, msg)
	if err != nil {
		m.Counters.Dropped++
		return fmt.Errorf("handle %v: %w", msg.Header().AttrID(), err)
	}
	return nil
}

func (m *Manager) dispatch(now time.Time, src Address, msg mad.MAD) error {
	data := msg.Data()
	attr := msg.Header().AttrID()
	switch attr {
	case mad.AttrREQ:
		return m.handleREQ(now, src, msg)
	case mad.AttrSIDRREQ:
		return m.handleSIDRREQ(now, src, msg)
	case mad.AttrSIDRREP:
		return m.handleSIDRREP(now, src, msg)
	case mad.AttrAPR:
		return ErrUnsupported
	}
	// Every other message names its receiver's communication ID at byte
	// 4 and its sender's at byte 0 (IBA 12.6: Tables 107-116).
	local, remote := mad.RTU(data).RemoteCommID(), mad.RTU(data).LocalCommID()
	c := m.conns[local]
	if c == nil && attr == mad.AttrREJ {
		// A REJ may come before the peer learnt our ID: the active side
		// giving up on a REQ we MRAed or answered (IBA 12.6.7: Remote
		// Communication ID "0 if not known").
		c = m.remote[remoteKey{src.GID, remote}]
	}
	if c == nil && attr == mad.AttrDREQ {
		// A DREQ for a connection we no longer have: our DREP was lost
		// and time-wait is over. Answer it so the peer stops retrying,
		// as ib_cm's cm_issue_drep does.
		out := mad.NewCM(m.buf[:], mad.AttrDREP, msg.Header().TID())
		out.DREP().Encode(&mad.CommIDsFields{LocalCommID: local, RemoteCommID: remote})
		m.send(gsiAddress(src.GID), out)
		return nil
	}
	if c == nil {
		return ErrUnknownConn
	}
	if c.peer.GID != src.GID || (c.remoteID != 0 && c.remoteID != remote) {
		return ErrUnknownConn
	}
	switch attr {
	case mad.AttrMRA:
		return c.handleMRA(now, msg.MRA())
	case mad.AttrREJ:
		return c.handleREJ(now, msg.REJ())
	case mad.AttrREP:
		return c.handleREP(now, msg.REP())
	case mad.AttrRTU:
		return c.handleRTU(now, msg.RTU())
	case mad.AttrDREQ:
		return c.handleDREQ(now, msg.Header().TID(), msg.DREQ())
	case mad.AttrDREP:
		return c.handleDREP(now, msg.DREP())
	case mad.AttrLAP:
		return c.handleLAP(now, msg.Header().TID())
	}
	return ErrUnsupported
}

// newLocalID returns an unused nonzero local communication ID, which is
// also what a SIDR_REQ's Request ID is drawn from (as ib_cm does).
func (m *Manager) newLocalID() uint32 {
	for {
		id := m.rng.Uint32()
		if id != 0 && m.conns[id] == nil && m.sidrOut[id] == nil {
			return id
		}
	}
}

// tid makes a transaction ID for a request this side starts (REQ, DREQ),
// as ib_cm's cm_form_tid does: a per-manager high word and the local
// communication ID. Answers (REP, RTU, MRA, REJ, DREP, APR) carry the TID
// of the message they answer.
func (m *Manager) tid(localID uint32) uint64 { return uint64(m.tidHigh)<<32 | uint64(localID) }

// send sends a MAD, counting; a failure is a lost datagram (see
// MADSender).
func (m *Manager) send(dst Address, b []byte) {
	m.Counters.MADsOut++
	if err := m.cfg.Send.SendMAD(dst, b); err != nil {
		m.Counters.SendErrors++
	}
}

func (m *Manager) emit(e Event) { m.events = append(m.events, e) }

// rejectREQ answers a REQ that makes no connection (no listener, a stale
// or unsupported request) with a REJ from no connection: local comm ID 0.
func (m *Manager) rejectREQ(src Address, req mad.MAD, reason mad.RejectReason) {
	out := mad.NewCM(m.buf[:], mad.AttrREJ, req.Header().TID())
	out.REJ().Encode(&mad.REJFields{
		RemoteCommID:    req.REQ().LocalCommID(),
		MessageRejected: mad.MsgREQ,
		Reason:          reason,
	})
	m.send(gsiAddress(src.GID), out)
}

// ackTimeout is the kernel's cm_ack_timeout: the exponent of roughly
// 2^(lifetime+1) + 2^ackDelay, i.e. the round trip plus the peer's ACK
// delay, in 4.096 µs units.
func ackTimeout(ackDelay, lifetime uint8) uint8 {
	a, b := lifetime+1, ackDelay
	if a < b {
		a, b = b, a
	}
	if b+1 >= a {
		a++
	}
	return min(a, 31)
}
