package rdmacm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// Config configures a CM. The zero value is what rdma_cm uses.
type Config struct {
	// CM tunes the state machines: response timeout, retries, the
	// packet lifetime. Its GID, Send, QP, Seed and MaxMTU are filled in
	// from the device.
	CM cm.Config
	// Clock, when set, replaces time.Now (tests).
	Clock func() time.Time
}

// CM is the connection manager of one device (an rdma_cm event channel
// and its IDs): one goroutine that owns a cm.Manager and the device's
// GSI QP. Its methods are safe for concurrent use.
type CM struct {
	dev    *verbs.Device // nil over a test transport
	local  netip.Addr
	maxMTU int
	tr     transport
	clock  func() time.Time
	mgr    *cm.Manager // the loop's only

	calls chan func(now time.Time)
	quit  chan struct{}
	exit  chan struct{}
	once  sync.Once

	// The loop's own state.
	byQPN     map[uint32]*Conn
	listeners map[uint64]*Listener
	// udListeners are the UDP port space's, answered with SIDR.
	udListeners map[uint64]*UDListener
	// awaitRTU holds the passive connections whose REP is out: their
	// QPs are polled for a first packet, which stands in for a lost RTU.
	awaitRTU map[*Conn]struct{}
}

// Open starts a CM on dev: it creates the device's GSI QP (QP1), so a
// device has at most one.
func Open(dev *verbs.Device, cfg Config) (*CM, error) {
	tr, err := openGSI(dev)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	m, err := open(tr, dev.Addr(), dev.MaxPathMTU(), cfg)
	if err != nil {
		tr.Close()
		return nil, err
	}
	m.dev = dev
	return m, nil
}

// open starts a CM over any transport.
func open(tr transport, local netip.Addr, maxMTU int, cfg Config) (*CM, error) {
	m := &CM{
		local:     local,
		maxMTU:    maxMTU,
		tr:        tr,
		clock:     cfg.Clock,
		calls:     make(chan func(time.Time)),
		quit:      make(chan struct{}),
		exit:      make(chan struct{}),
		byQPN:     map[uint32]*Conn{},
		listeners: map[uint64]*Listener{},
		awaitRTU:  map[*Conn]struct{}{},

		udListeners: map[uint64]*UDListener{},
	}
	if m.clock == nil {
		m.clock = time.Now
	}
	c := cfg.CM
	c.GID = mad.GIDFromAddr(local)
	c.Send = tr
	c.QP = modifier{m}
	// A fresh seed per CM, so a restarted process does not reuse the
	// communication IDs its peers may still hold in time-wait.
	c.Seed = rand.Uint64()
	if c.CAGUID == 0 {
		c.CAGUID = rand.Uint64()
	}
	c.MaxMTU = mad.MTUFromBytes(maxMTU)
	mgr, err := cm.New(c)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	m.mgr = mgr
	go m.loop()
	return m, nil
}

// Addr returns the local address: the device's GID as an IP address.
func (m *CM) Addr() netip.Addr { return m.local }

// Close stops the CM and its GSI QP. Connections are not disconnected
// (as when a process exits, the peers' DREQs or keepalives notice);
// pending Dial, Accept and Listener.Accept calls return ErrClosed.
func (m *CM) Close() error {
	m.once.Do(func() { close(m.quit) })
	<-m.exit
	return m.tr.Close()
}

// Counters returns the state machines' counters.
func (m *CM) Counters() cm.Counters {
	var c cm.Counters
	m.do(func(time.Time) { c = m.mgr.Counters })
	return c
}

// do runs f on the loop and waits for it.
func (m *CM) do(f func(now time.Time)) error {
	done := make(chan struct{})
	select {
	case m.calls <- func(now time.Time) { f(now); close(done) }:
	case <-m.exit:
		return ErrClosed
	}
	<-done
	return nil
}

// loop owns the manager: MADs in, calls from the API, timers, and the
// events they cause.
func (m *CM) loop() {
	defer close(m.exit)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var events []cm.Event
	for {
		d, ok := m.mgr.NextDeadline()
		if len(m.awaitRTU) > 0 {
			if p := m.clock().Add(dataPoll); !ok || p.Before(d) {
				d, ok = p, true
			}
		}
		if ok {
			timer.Reset(max(d.Sub(m.clock()), 0))
		} else {
			timer.Stop()
		}
		select {
		case <-m.quit:
			m.shutdown()
			return
		case dg := <-m.tr.Incoming():
			// The error only says why a MAD was dropped; the manager
			// counts it (Counters).
			_ = m.mgr.HandleMAD(m.clock(), dg.src, dg.b)
		case f := <-m.calls:
			f(m.clock())
		case <-timer.C:
		}
		now := m.clock()
		m.firstData(now)
		m.mgr.Tick(now)
		events = m.mgr.PollEvents(events[:0])
		for _, e := range events {
			m.handle(now, e)
		}
		clear(events)
	}
}

// dataPoll is how often the QPs of connections waiting for their RTU are
// asked whether a packet arrived: the verbs layer has no per-QP event for
// it, and a lost RTU otherwise costs a REP retransmission timeout.
const dataPoll = 10 * time.Millisecond

// firstData tells the state machine of each passive connection whose QP
// received a packet (IBA 12.9.6: first data is RTU, what the kernel's
// IB_EVENT_COMM_EST does for ib_cm).
func (m *CM) firstData(now time.Time) {
	for c := range m.awaitRTU {
		if c.qp != nil && c.qp.Counters().RxPackets > 0 {
			c.cc.DataReceived(now)
		}
	}
}

// shutdown fails every waiter.
func (m *CM) shutdown() {
	for _, c := range m.byQPN {
		c.finish(ErrClosed)
		c.closeDone()
	}
	for _, l := range m.listeners {
		l.closeLocked()
	}
	for _, l := range m.udListeners {
		l.closeLocked()
	}
}

// handle turns one manager event into the API's.
func (m *CM) handle(now time.Time, e cm.Event) {
	if e.SIDR != nil {
		m.handleSIDR(now, e)
		return
	}
	if e.Type == cm.EventConnectRequest {
		m.request(now, e.Conn)
		return
	}
	c, _ := e.Conn.Context.(*Conn)
	if c == nil {
		return // a request nobody took, rejected
	}
	delete(m.awaitRTU, c) // whatever happened, the wait for the RTU is over
	ev := Event{Type: e.Type, Reason: e.Reason, PrivateData: e.PrivateData, Err: e.Err}
	switch e.Type {
	case cm.EventEstablished:
		c.attr = e.Conn.Attr()
		if c.active {
			c.privateData = e.PrivateData
		}
		c.established = true
		c.finish(nil)
	case cm.EventRejected:
		c.finish(&RejectError{Reason: e.Reason, PrivateData: e.PrivateData})
		m.forget(c)
	case cm.EventUnreachable:
		c.finish(ErrUnreachable)
		m.forget(c)
	case cm.EventConnectError:
		c.finish(fmt.Errorf("%w: %w", ErrConnect, e.Err))
		m.forget(c)
	case cm.EventDisconnected:
		c.finish(fmt.Errorf("%w: disconnected while connecting", ErrConnect))
		c.closeDone()
	case cm.EventTimewaitExit:
		m.forget(c)
	}
	c.post(ev)
}

// forget drops a connection whose QP the CM no longer moves.
func (m *CM) forget(c *Conn) {
	if m.byQPN[c.qpn] == c {
		delete(m.byQPN, c.qpn)
	}
	delete(m.awaitRTU, c)
	c.closeDone()
}

// modifier is the cm.QPModifier: the negotiated attributes, as Modify QP
// calls on the connection's verbs QP (the transitions rdma_cm's
// rdma_init_qp_attr makes; IBA 11.2.4.2).
type modifier struct{ m *CM }

func (q modifier) ModifyQP(_ time.Time, to cm.QPState, a *cm.QPAttr) error {
	c := q.m.byQPN[a.QPN]
	if c == nil {
		return fmt.Errorf("modify QP %#x: %w: no connection", a.QPN, ErrBadState)
	}
	var attr verbs.QPAttr
	var mask verbs.AttrMask
	switch to {
	case cm.QPStateRTR:
		attr = verbs.QPAttr{State: verbs.StateRTR, DestAddr: a.DestGID.Addr().Unmap(), HopLimit: a.HopLimit,
			TrafficClass: a.TrafficClass, PKey: a.PKey, PathMTU: a.PathMTU.Bytes(), DestQPN: a.DestQPN, RQPSN: a.RQPSN,
			MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer}
		mask = attrRTR
		// Selective repeat changes what WRITE packets carry, so it is
		// set here, before the QP receives, and only as negotiated: a
		// non-uroce peer's QP would misread them.
		if a.SelectiveRepeat {
			attr.Retrans = c.retrans | verbs.RetransSelective
		} else {
			attr.Retrans = c.retrans
		}
		if attr.Retrans != 0 {
			mask |= verbs.AttrRetrans
		}
	case cm.QPStateRTS:
		attr = verbs.QPAttr{State: verbs.StateRTS, Timeout: a.Timeout, RetryCnt: a.RetryCount, RNRRetry: a.RNRRetry,
			SQPSN: a.SQPSN, MaxRdAtomic: a.MaxRdAtomic}
		mask = attrRTS
	case cm.QPStateError:
		attr = verbs.QPAttr{State: verbs.StateErr}
		mask = attrState
	default:
		return fmt.Errorf("modify QP %#x to %v: %w", a.QPN, to, ErrBadParam)
	}
	if c.qp == nil {
		return nil // a test's connection without a QP
	}
	if err := c.qp.Modify(&attr, mask); err != nil {
		return fmt.Errorf("modify QP %#x to %v: %w", a.QPN, to, err)
	}
	return nil
}
