package rpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/verbs"
)

// Client issues requests and RDMA READs over one RC QP. Its methods are safe
// for concurrent use; up to Config.Slots of them are in flight at once and
// the rest wait for a free slot.
type Client struct {
	cfg  Config
	d    *verbs.Device
	pd   *verbs.PD
	cq   *verbs.CQ
	qp   *verbs.QueuePair
	mr   *verbs.MR
	psn  uint32
	recv []verbs.RecvWR // one per receive buffer, reposted as is
	free chan int       // indexes of free slots

	mu     sync.Mutex // guards slots' shared fields, broken
	slots  []slot
	broken error
	dead   chan struct{} // closed when broken is set

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	// The poll token: its holder takes completions for everyone.
	poller    sync.Mutex
	wc        [32]verbs.WC  // the holder's
	tokenFree chan struct{} // capacity 1: the token was let go
	sleepers  atomic.Int32  // callers asleep that could take it

	calls, reads, expired, late, stray atomic.Uint64
}

type slotKind uint8

const (
	kindCall slotKind = iota
	kindRead
)

// slot is one request in flight. msg, wr and sge belong to the goroutine
// holding the slot; the rest is shared with the dispatcher under Client.mu.
type slot struct {
	msg []byte
	wr  verbs.SendWR
	sge [1]verbs.SGE

	gen     uint16
	kind    slotKind
	waiting bool   // a caller waits for the result
	pending int    // events left before the slot is free
	dst     []byte // the caller's buffer, while waiting
	result  chan result
}

type result struct {
	n   int
	err error
}

// ClientStats counts a client's work.
type ClientStats struct {
	Calls, Reads uint64
	// Expired counts requests whose context ended before their reply.
	Expired uint64
	// Late counts replies (and READ completions) that came for expired
	// requests and were dropped.
	Late uint64
	// Stray counts replies that matched no request.
	Stray uint64
}

// NewClient makes a client's QP, CQ and buffers on d. Connect it next.
func NewClient(d *verbs.Device, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	c := &Client{
		cfg: cfg, d: d, pd: d.AllocPD(),
		cq:    d.CreateCQ(2*cfg.Slots + 1),
		psn:   rand.Uint32() & 0xffffff,
		free:  make(chan int, cfg.Slots),
		slots: make([]slot, cfg.Slots),
		recv:  make([]verbs.RecvWR, cfg.Slots),
		dead:  make(chan struct{}),

		tokenFree: make(chan struct{}, 1),
	}
	var err error
	c.qp, err = c.pd.CreateQP(&verbs.QPInit{SendCQ: c.cq, RecvCQ: c.cq,
		Cap: verbs.QPCap{MaxSendWR: cfg.Slots, MaxRecvWR: cfg.Slots, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: cfg.bufLen()}})
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	// Receive buffers first, then one READ buffer per slot.
	rb := cfg.Slots * cfg.bufLen()
	c.mr, err = c.pd.RegMR(make([]byte, rb+cfg.Slots*cfg.MaxMsg), verbs.AccessLocalWrite)
	if err != nil {
		c.qp.Destroy()
		return nil, fmt.Errorf("new client: %w", err)
	}
	for i := range c.slots {
		s := &c.slots[i]
		s.msg = make([]byte, cfg.bufLen())
		s.sge[0] = c.mr.SGE(rb+i*cfg.MaxMsg, cfg.MaxMsg)
		s.result = make(chan result, 1)
		c.free <- i
		c.recv[i] = verbs.RecvWR{ID: recvTag | uint64(i), SGL: []verbs.SGE{c.mr.SGE(i*cfg.bufLen(), cfg.bufLen())}}
	}
	return c, nil
}

// Endpoint is what the server needs to connect to this client.
func (c *Client) Endpoint() verbs.Endpoint { return c.qp.Endpoint(c.psn) }

// Connect connects the QP to the server's endpoint (from Server.Accept),
// posts the receive buffers and starts the goroutine that takes completions.
func (c *Client) Connect(remote verbs.Endpoint) error {
	o := c.cfg.Connect
	o.PSN = c.psn
	if err := c.qp.Connect(remote, o); err != nil {
		return fmt.Errorf("rpc connect: %w", err)
	}
	for i := range c.recv {
		if err := c.qp.PostRecv(&c.recv[i]); err != nil {
			return fmt.Errorf("rpc connect: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop, c.done = cancel, make(chan struct{})
	go c.run(ctx)
	return nil
}

// Call sends req with method to the server and copies the reply's body into
// resp, returning its length. It returns ctx's error if ctx ends first (the
// late reply is then dropped), a StatusError for a non-zero status,
// ErrShortBuffer if the reply was cut to fit resp, or an error wrapping
// ErrBroken, ErrClosed or ErrTooLarge. Call allocates nothing.
func (c *Client) Call(ctx context.Context, method uint16, req, resp []byte) (int, error) {
	if len(req) > c.cfg.MaxMsg {
		return 0, fmt.Errorf("call: %w: %d bytes", ErrTooLarge, len(req))
	}
	i, err := c.acquire(ctx)
	if err != nil {
		return 0, err
	}
	s := &c.slots[i]
	putHeader(s.msg, method)
	n := HeaderLen + copy(s.msg[HeaderLen:], req)
	id, err := c.arm(i, kindCall, resp, 3)
	if err != nil {
		return 0, err
	}
	s.wr = verbs.SendWR{ID: uint64(id), Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled | verbs.SendInline,
		Imm: id, InlineData: s.msg[:n]}
	if err := c.qp.PostSend(&s.wr); err != nil {
		c.disarm(i)
		return 0, fmt.Errorf("call: %w", err)
	}
	c.calls.Add(1)
	return c.wait(ctx, s, id)
}

// Read reads len(dst) bytes at the server's address raddr of the region
// with rkey into dst with one RDMA READ: the server's CPU plays no part.
// Errors are as for Call; a READ the server's region refuses breaks the
// connection (IBA 9.7.5.2.4: a remote access error is fatal to the QP).
func (c *Client) Read(ctx context.Context, dst []byte, raddr uint64, rkey uint32) error {
	if len(dst) > c.cfg.MaxMsg {
		return fmt.Errorf("read: %w: %d bytes", ErrTooLarge, len(dst))
	}
	i, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	s := &c.slots[i]
	id, err := c.arm(i, kindRead, dst, 2)
	if err != nil {
		return err
	}
	s.sge[0].Length = uint32(len(dst))
	s.wr = verbs.SendWR{ID: uint64(id), Opcode: verbs.WRRead, Flags: verbs.SendSignaled,
		SGL: s.sge[:], RemoteAddr: raddr, RKey: rkey}
	if err := c.qp.PostSend(&s.wr); err != nil {
		c.disarm(i)
		return fmt.Errorf("read: %w", err)
	}
	c.reads.Add(1)
	_, err = c.wait(ctx, s, id)
	return err
}

// acquire takes a free slot, waiting for one while all are in flight.
func (c *Client) acquire(ctx context.Context) (int, error) {
	select {
	case i := <-c.free:
		return i, nil
	default:
	}
	select {
	case i := <-c.free:
		return i, nil
	case <-c.dead:
		return 0, c.err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *Client) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// arm marks slot i as waiting for its completions and returns its request
// ID, the new generation making any older reply for the slot a stray.
// It fails once the connection is broken: a WR posted to a QP in the error
// state would only complete flushed.
func (c *Client) arm(i int, k slotKind, dst []byte, pending int) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		c.free <- i
		return 0, c.broken
	}
	s := &c.slots[i]
	s.gen++
	s.kind, s.waiting, s.pending, s.dst = k, true, pending, dst
	return requestID(i, s.gen), nil
}

// disarm frees slot i after a post failed: nothing is in flight for it.
func (c *Client) disarm(i int) {
	c.mu.Lock()
	s := &c.slots[i]
	s.waiting, s.pending, s.dst = false, 0, nil
	c.mu.Unlock()
	c.free <- i
}

// wait returns the slot's result, or abandons the slot when ctx ends.
// Either way the caller's part is over, which is one of the events the
// slot waits for: freeing it before the caller has taken its result would
// let the next user of the slot take that result instead.
//
// A waiting caller takes completions itself when no one else does (it
// holds the poll token), as eRPC's run-to-completion callers do: on an
// inline device its CQ.Wait drives the engine, and a lone caller's reply
// reaches it with no goroutine hand-off. Other callers sleep on their
// slot's channel until the holder delivers their result or lets go.
func (c *Client) wait(ctx context.Context, s *slot, id uint32) (int, error) {
	for {
		select {
		case r := <-s.result:
			c.event(id)
			c.passToken()
			return r.n, r.err
		default:
		}
		if c.poller.TryLock() {
			err := c.poll(ctx, s)
			c.poller.Unlock()
			c.passToken()
			if err != nil {
				break
			}
			continue
		}
		c.sleepers.Add(1)
		select {
		case r := <-s.result:
			c.sleepers.Add(-1)
			c.event(id)
			c.passToken()
			return r.n, r.err
		case <-c.tokenFree:
			c.sleepers.Add(-1)
			continue
		case <-ctx.Done():
			c.sleepers.Add(-1)
		}
		break
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.eventLocked(id)
	select {
	case r := <-s.result: // the reply won the race with the deadline
		return r.n, r.err
	default:
	}
	s.waiting, s.dst = false, nil
	c.expired.Add(1)
	return 0, ctx.Err()
}

// passToken wakes a sleeping caller to take the poll token, if one sleeps.
func (c *Client) passToken() {
	if c.sleepers.Load() > 0 {
		select {
		case c.tokenFree <- struct{}{}:
		default:
		}
	}
}

// poll takes completions, holding the poll token, until s has its result,
// the connection breaks, or ctx ends (then it returns ctx's error).
func (c *Client) poll(ctx context.Context, s *slot) error {
	for len(s.result) == 0 {
		select {
		case <-c.dead:
			return nil // fail delivered every waiting caller's result
		default:
		}
		n, err := c.cq.Wait(ctx, c.wc[:])
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.fail(fmt.Errorf("%w: %w", ErrBroken, err))
			return nil
		}
		for k := range c.wc[:n] {
			c.complete(&c.wc[k])
		}
	}
	return nil
}

// idlePoll is how often the client's goroutine takes completions while no
// caller waits: ACKs for the server's replies, late replies, SEND
// completions that came after their reply. It is far below the default
// transport timeout (67 ms), so the server never retransmits for want of
// an ACK.
const idlePoll = time.Millisecond

// run takes completions while no caller does, until Close.
func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(idlePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.poller.TryLock() {
			continue
		}
		for {
			n := c.cq.Poll(c.wc[:])
			for k := range c.wc[:n] {
				c.complete(&c.wc[k])
			}
			if n < len(c.wc) {
				break
			}
		}
		c.poller.Unlock()
		c.passToken()
	}
}

func (c *Client) complete(wc *verbs.WC) {
	if wc.Status != verbs.WCSuccess {
		c.fail(fmt.Errorf("%w: %w", ErrBroken, WCError{wc.Status}))
		return
	}
	if wc.WRID&recvTag != 0 {
		b := int(wc.WRID &^ recvTag)
		off := b * c.cfg.bufLen()
		msg := c.mr.Buf()[off : off+int(wc.ByteLen)]
		c.reply(wc.Imm, msg)
		// Repost before the slot can be freed, keeping the credit promise.
		if err := c.qp.PostRecv(&c.recv[b]); err != nil {
			c.fail(fmt.Errorf("%w: repost: %w", ErrBroken, err))
		}
		c.event(wc.Imm)
		return
	}
	c.mu.Lock()
	i, gen := splitID(uint32(wc.WRID))
	s := &c.slots[i]
	if gen == s.gen && s.kind == kindRead {
		if s.waiting {
			off := c.cfg.Slots*c.cfg.bufLen() + i*c.cfg.MaxMsg
			s.result <- result{n: copy(s.dst, c.mr.Buf()[off:off+len(s.dst)])}
			s.waiting, s.dst = false, nil
		} else {
			c.late.Add(1)
		}
	}
	c.mu.Unlock()
	c.event(uint32(wc.WRID))
}

// reply delivers a reply to its waiting caller, or counts it as late.
func (c *Client) reply(id uint32, msg []byte) {
	i, gen := splitID(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.slots) || c.slots[i].gen != gen || c.slots[i].kind != kindCall || len(msg) < HeaderLen {
		c.stray.Add(1)
		return
	}
	s := &c.slots[i]
	if !s.waiting {
		c.late.Add(1)
		return
	}
	body := msg[HeaderLen:]
	r := result{n: copy(s.dst, body)}
	if st := header(msg); st != 0 {
		r.err = StatusError(st)
	} else if r.n < len(body) {
		r.err = ErrShortBuffer
	}
	s.result <- r
	s.waiting, s.dst = false, nil
}

// event counts one of a slot's events (its send or READ completing, its
// reply, its caller done) and frees it after the last.
func (c *Client) event(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eventLocked(id)
}

func (c *Client) eventLocked(id uint32) {
	i, gen := splitID(id)
	if i >= len(c.slots) || c.slots[i].gen != gen || c.slots[i].pending == 0 {
		return
	}
	s := &c.slots[i]
	if s.pending--; s.pending == 0 && c.broken == nil {
		c.free <- i
	}
}

// fail breaks the connection: every waiting caller gets the first error,
// and so does every later one.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
		close(c.dead)
	}
	err = c.broken
	for i := range c.slots {
		s := &c.slots[i]
		if s.waiting {
			s.result <- result{err: err}
			s.waiting, s.dst = false, nil
		}
	}
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Calls: c.calls.Load(), Reads: c.reads.Load(), Expired: c.expired.Load(),
		Late: c.late.Load(), Stray: c.stray.Load()}
}

// Close stops the client and destroys its QP; callers in flight get an
// error wrapping ErrClosed. Later calls of Close do nothing.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Client) close() error {
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	c.fail(ErrClosed)
	// A caller holding the poll token may sleep in CQ.Wait: the error
	// state flushes the QP's work (IBA 10.3.1), and those completions
	// wake it. Then no one polls the CQ any more.
	c.qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState)
	c.poller.Lock()
	defer c.poller.Unlock()
	err := c.qp.Destroy()
	c.mr.Dereg()
	c.cq.Destroy()
	return err
}
