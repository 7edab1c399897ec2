package rpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/uroce/uroce/verbs"
)

// Handler serves one request: it reads req (valid only during the call),
// writes the reply's body into resp (Config.MaxMsg bytes) and returns its
// length and a status, 0 for success. Handlers run one at a time on the
// server's goroutine.
type Handler func(method uint16, req, resp []byte) (n int, status uint16)

// Server answers requests from any number of clients, each on its own QP,
// all on one CQ and one goroutine.
type Server struct {
	cfg Config
	d   *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	h   Handler

	mu    sync.Mutex
	conns map[uint32]*conn // by local QPN
	all   []*conn

	scratch []byte // the reply being built, header first
	reply   verbs.SendWR
	stop    context.CancelFunc
	done    chan struct{}
}

// conn is one client's QP and its receive buffers.
type conn struct {
	qp     *verbs.QueuePair
	mr     *verbs.MR
	recv   []verbs.RecvWR
	broken bool
}

// NewServer starts a server on d whose requests go to h. Its protection
// domain is PD, where regions for clients' READs belong.
func NewServer(d *verbs.Device, cfg Config, h Handler) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, d: d, pd: d.AllocPD(), h: h,
		// Per connection: a receive per slot and a send per reply
		// outstanding, and the sends that wait for ACKs.
		cq:      d.CreateCQ(cfg.MaxConns * 3 * cfg.Slots),
		conns:   make(map[uint32]*conn),
		scratch: make([]byte, cfg.bufLen()),
		stop:    cancel,
		done:    make(chan struct{}),
	}
	go s.run(ctx)
	return s
}

// PD is the server's protection domain.
func (s *Server) PD() *verbs.PD { return s.pd }

// Accept makes a QP for the client at remote, posts its receive buffers,
// connects it, and returns the endpoint to give the client's Connect.
func (s *Server) Accept(remote verbs.Endpoint) (verbs.Endpoint, error) {
	s.mu.Lock()
	n := len(s.all)
	s.mu.Unlock()
	if n >= s.cfg.MaxConns {
		return verbs.Endpoint{}, fmt.Errorf("accept: %w", ErrTooManyConns)
	}
	c := &conn{recv: make([]verbs.RecvWR, s.cfg.Slots)}
	var err error
	// Twice the slots: a reply's send stays queued until ACKed, which may
	// be after the client has sent its next request on the freed slot.
	c.qp, err = s.pd.CreateQP(&verbs.QPInit{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: 2 * s.cfg.Slots, MaxRecvWR: s.cfg.Slots, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: s.cfg.bufLen()}})
	if err != nil {
		return verbs.Endpoint{}, fmt.Errorf("accept: %w", err)
	}
	c.mr, err = s.pd.RegMR(make([]byte, s.cfg.Slots*s.cfg.bufLen()), verbs.AccessLocalWrite)
	if err != nil {
		c.qp.Destroy()
		return verbs.Endpoint{}, fmt.Errorf("accept: %w", err)
	}
	o := s.cfg.Connect
	o.PSN = rand.Uint32() & 0xffffff
	if err := c.qp.Connect(remote, o); err != nil {
		c.close()
		return verbs.Endpoint{}, fmt.Errorf("accept: %w", err)
	}
	// Receives go up before the client learns our endpoint, so its first
	// SEND finds one.
	for i := range c.recv {
		c.recv[i] = verbs.RecvWR{ID: recvTag | uint64(i), SGL: []verbs.SGE{c.mr.SGE(i*s.cfg.bufLen(), s.cfg.bufLen())}}
		if err := c.qp.PostRecv(&c.recv[i]); err != nil {
			c.close()
			return verbs.Endpoint{}, fmt.Errorf("accept: %w", err)
		}
	}
	s.mu.Lock()
	s.conns[c.qp.QPN()] = c
	s.all = append(s.all, c)
	s.mu.Unlock()
	return c.qp.Endpoint(o.PSN), nil
}

func (c *conn) close() {
	c.qp.Destroy()
	c.mr.Dereg()
}

func (s *Server) run(ctx context.Context) {
	defer close(s.done)
	var wc [32]verbs.WC
	for {
		n, err := s.cq.Wait(ctx, wc[:])
		if err != nil {
			return
		}
		for k := range wc[:n] {
			s.complete(&wc[k])
		}
	}
}

func (s *Server) complete(wc *verbs.WC) {
	s.mu.Lock()
	c := s.conns[wc.QPN]
	s.mu.Unlock()
	if c == nil || c.broken {
		return
	}
	if wc.Status != verbs.WCSuccess {
		// The QP is in the error state (a flush or a lost client); its
		// other work completes flushed and is ignored with it.
		c.broken = true
		return
	}
	if wc.WRID&recvTag == 0 {
		return // a reply's send completed
	}
	b := int(wc.WRID &^ recvTag)
	off := b * s.cfg.bufLen()
	msg := c.mr.Buf()[off : off+int(wc.ByteLen)]
	n, status := 0, uint16(0)
	if len(msg) < HeaderLen {
		status = StatusBadRequest
	} else {
		n, status = s.h(header(msg), msg[HeaderLen:], s.scratch[HeaderLen:])
		n = min(max(n, 0), s.cfg.MaxMsg)
	}
	putHeader(s.scratch, status)
	// The request is consumed: its buffer goes back before the reply goes
	// out, so the client's next request, sent on seeing the reply, finds it.
	if err := c.qp.PostRecv(&c.recv[b]); err != nil {
		c.broken = true
		return
	}
	s.reply = verbs.SendWR{ID: uint64(b), Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled | verbs.SendInline,
		Imm: wc.Imm, InlineData: s.scratch[:HeaderLen+n]}
	for {
		err := c.qp.PostSend(&s.reply)
		if err == nil {
			return
		}
		if !errors.Is(err, verbs.ErrQueueFull) {
			c.broken = true
			return
		}
		// Every send slot waits for an ACK; let the engine take them.
		var none [0]verbs.WC
		s.cq.Poll(none[:])
		time.Sleep(10 * time.Microsecond)
	}
}

// StatusBadRequest is the status of a request too short for its header.
const StatusBadRequest = 0xffff

// Close stops the server and destroys its QPs.
func (s *Server) Close() error {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.all {
		c.close()
	}
	s.all, s.conns = nil, nil
	s.cq.Destroy()
	return nil
}
