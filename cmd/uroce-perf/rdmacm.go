package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// -R (perftest's --rdma_cm): the test's QPs are connected by rdma_cm, and
// the out-of-band exchange runs without TCP, as RC SENDs over one more
// rdma_cm connection made first (perftest's comm struct with use_rdma_cm).
// Both connections go to the same port, 18515 by default, in rdma_cm's TCP
// port space. The order, from perftest 4.5's main and
// create_rdma_cm_connection:
//
//	exchange connection (REQ, REP, RTU), its QP posting one receive
//	version, page size, cache line, MTU   (16, 4, 4, 2 bytes)
//	a handshake of zeroed Dests           (56 bytes: my_dest not yet set)
//	the test QPs' connections (the client retries while the server is not
//	yet listening again)
//	a handshake of zeroed Dests
//	the test's own handshakes, its run and closing handshake, as over TCP,
//	with 56-byte binary Dests and no "done"
//	disconnect: the test's connections, then the exchange's
//
// testdata/rxe-captures/ib_write_lat_rdmacm.pcap shows this exchange
// between two perftests on rxe.

// Exchange QP sizing: perftest posts one receive at a time and never has
// more than one message in flight each way; a few spare receives cost
// nothing and keep a peer that sends early from an RNR wait.
const (
	cmRecvs = 4
	cmSlot  = 64 // the largest message is the 56-byte Dest
)

// cmLinger bounds the wait for the peer's DREP when disconnecting (the
// CM's own retries end it anyway; this only keeps a vanished peer from
// holding the process).
const cmLinger = 2 * time.Second

// cmRetry is how long the client waits between connection attempts that
// the server refused because it was not listening yet (perftest's
// rdma_cm_client_connection: 100 ms).
const cmRetry = 100 * time.Millisecond

// msgConn is the exchange's transport over an RC QP: Write is one SEND of
// its argument, Read one received message. Waiting on its CQ drives the
// device's engine inline, so the test QPs keep being served while a side
// waits in a handshake (a read_lat or write_bw server waits in one for the
// whole test).
type msgConn struct {
	ctx     context.Context
	pd      *verbs.PD
	cq      *verbs.CQ
	qp      *verbs.QueuePair
	mr      *verbs.MR // cmRecvs receive slots, then the send slot
	wc      [8]verbs.WC
	pending []verbs.WC // polled into wc, not taken yet
	recv    []verbs.WC // receive completions not read yet
}

var errShortMessage = errors.New("exchange message size mismatch")

func newMsgConn(ctx context.Context, dev *verbs.Device) (m *msgConn, err error) {
	m = &msgConn{ctx: ctx, pd: dev.AllocPD(), cq: dev.CreateCQ(2 * (cmRecvs + 1))}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.mr, err = m.pd.AllocMR((cmRecvs+1)*cmSlot, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("exchange QP: %w", err)
	}
	if m.qp, err = m.pd.CreateQP(&verbs.QPInit{SendCQ: m.cq, RecvCQ: m.cq,
		Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: cmRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, fmt.Errorf("exchange QP: %w", err)
	}
	// Receives before the connection, as perftest posts its one before
	// rdma_connect and rdma_accept: the peer's first SEND may come at
	// once.
	if err = rdmacm.InitQP(m.qp, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("exchange QP: %w", err)
	}
	for i := range cmRecvs {
		if err = m.post(i); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *msgConn) post(slot int) error {
	if err := m.qp.PostRecv(&verbs.RecvWR{ID: uint64(slot), SGL: []verbs.SGE{m.mr.SGE(slot*cmSlot, cmSlot)}}); err != nil {
		return fmt.Errorf("exchange: post recv: %w", err)
	}
	return nil
}

// next waits for the next completion, keeping receives for Read. It takes
// completions in order and leaves those after the one it returns for the
// next call: at the end the server disconnects as soon as its last message
// is through, and the flushed receives that follow in the CQ must not fail
// a client that already has what it waited for.
func (m *msgConn) next(want verbs.WCOpcode) (verbs.WC, error) {
	for {
		if want == verbs.WCRecv && len(m.recv) > 0 {
			w := m.recv[0]
			m.recv = m.recv[1:]
			return w, nil
		}
		if len(m.pending) == 0 {
			n, err := m.cq.Wait(m.ctx, m.wc[:])
			if err != nil {
				return verbs.WC{}, fmt.Errorf("exchange: %w", err)
			}
			m.pending = m.wc[:n]
		}
		w := m.pending[0]
		m.pending = m.pending[1:]
		switch {
		case w.Status != verbs.WCSuccess:
			return w, fmt.Errorf("exchange: %w: %v on %v", ErrCompletion, w.Status, w.Opcode)
		case w.Opcode == verbs.WCRecv:
			m.recv = append(m.recv, w)
		case w.Opcode == want:
			return w, nil
		}
	}
}

// Write sends p as one SEND and waits for its completion (perftest's
// rdma_write_data).
func (m *msgConn) Write(p []byte) (int, error) {
	if len(p) > cmSlot {
		return 0, fmt.Errorf("exchange: %w: %d bytes", errShortMessage, len(p))
	}
	off := cmRecvs * cmSlot
	copy(m.mr.Buf()[off:], p)
	if err := m.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{m.mr.SGE(off, len(p))}}); err != nil {
		return 0, fmt.Errorf("exchange: post send: %w", err)
	}
	if _, err := m.next(verbs.WCSend); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Read returns the next message, which must be len(p) bytes: the two
// sides run the same sequence, so any other size means they diverged
// (perftest copies the size it expects whatever arrived).
func (m *msgConn) Read(p []byte) (int, error) {
	w, err := m.next(verbs.WCRecv)
	if err != nil {
		return 0, err
	}
	slot := int(w.WRID)
	n := copy(p, m.mr.Buf()[slot*cmSlot:slot*cmSlot+int(w.ByteLen)])
	if err := m.post(slot); err != nil {
		return 0, err
	}
	if int(w.ByteLen) != len(p) {
		return 0, fmt.Errorf("exchange: %w: %d bytes, want %d", errShortMessage, w.ByteLen, len(p))
	}
	return n, nil
}

func (m *msgConn) Close() error {
	if m.qp != nil {
		m.qp.Destroy()
	}
	if m.mr != nil {
		m.mr.Dereg()
	}
	m.cq.Destroy()
	return nil
}

// cmBench is the bench whose QPs rdma_cm connects: Connect only learns the
// peer's buffers from its Dests (perftest skips ctx_connect with -R).
type cmBench struct{ *bench }

func (b cmBench) Setup(sys perftest.SysData) ([]perftest.Dest, error) {
	mine, err := b.bench.Setup(sys)
	for i := range mine {
		mine[i].GIDIndex = int32(b.cfg.gidIdx)
	}
	return mine, err
}

func (b cmBench) Connect(remote []perftest.Dest) error {
	b.rem = append(b.rem[:0], remote...)
	return nil
}

// cmSide is one side's rdma_cm state: the CM, the server's listener, the
// exchange connection and the test's.
type cmSide struct {
	ctx    context.Context
	cfg    *config
	m      *rdmacm.CM
	l      *rdmacm.Listener // server
	peer   netip.AddrPort   // client
	conns  []*rdmacm.Conn   // the exchange's first, then the test's
	params rdmacm.Params
}

// runCMTest runs one side of a test with -R on the device the flags name.
func runCMTest(ctx context.Context, cfg *config, stdout io.Writer) error {
	dev, name, err := openLocal(cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	_, err = runCM(ctx, cfg, dev, name, stdout)
	return err
}

// runCM runs one side of a test with -R on dev and returns what it
// printed.
func runCM(ctx context.Context, cfg *config, dev *verbs.Device, name string, stdout io.Writer) (*printer, error) {
	server := cfg.peer == ""
	out, stop, mtu, err := begin(cfg, dev, name, stdout)
	if err != nil {
		return out, err
	}
	defer stop()
	m, err := rdmacm.Open(dev, rdmacm.Config{})
	if err != nil {
		return out, err
	}
	defer m.Close()
	// The exchange's connection is made before the MTU is settled: -m
	// caps it, else the device's largest (perftest's is the port's
	// active MTU, which rdma_cm's route carries).
	// rdma_cm's parameters have no retransmission flags: Params.Retrans
	// gives the QPs the command line's. Selective repeat is offered and
	// taken unless --selective_repeat=false; a perftest peer's REQ or
	// REP never has it.
	cs := &cmSide{ctx: ctx, cfg: cfg, m: m, params: rdmacm.Params{PathMTU: cfg.mtu, Retrans: cfg.retrans(),
		GoBackN: cfg.selectiveSet && !cfg.selective}}
	defer cs.disconnect()
	if server {
		// One listener for both connections: perftest listens anew for
		// the test's, and a REQ that comes meanwhile waits here instead
		// of being refused.
		if cs.l, err = m.Listen(uint16(cfg.port)); err != nil {
			return out, err
		}
		defer cs.l.Close()
		fmt.Fprint(stdout, waitingBanner)
	} else {
		addr, err := resolvePeer(cfg.peer)
		if err != nil {
			return out, err
		}
		if err := checkCMPeer(addr, dev.Addr(), cfg.ip == "" && cfg.dev == ""); err != nil {
			return out, err
		}
		cs.peer = netip.AddrPortFrom(addr, uint16(cfg.port))
	}
	xc, err := newMsgConn(ctx, dev)
	if err != nil {
		return out, err
	}
	defer xc.Close()
	if err := cs.connect(xc.qp, false); err != nil {
		return out, fmt.Errorf("exchange connection: %w", err)
	}
	b := cmBench{newBench(cfg, dev, server)}
	if r := cfg.outReads(); cfg.kind.verb == verbRead || cfg.kind.verb == verbAtomic {
		cs.params.ResponderResources, cs.params.InitiatorDepth = uint8(min(r, 128)), uint8(min(r, 128))
	}
	s := &session{cfg: cfg, conn: perftest.NewCMConn(xc, !server), r: b, out: out, server: server, sys: sysData(mtu)}
	s.cmConnect = func(sys perftest.SysData) error { return cs.connectTest(s.conn, b.qps, sys) }
	return out, s.runReport(out)
}

// resolvePeer takes an address or a host name, as perftest's getaddrinfo.
func resolvePeer(peer string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(peer); err == nil {
		return a.Unmap(), nil
	}
	ips, err := net.LookupIP(peer)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve %s: %w", peer, err)
	}
	a, _ := netip.AddrFromSlice(ips[0])
	return a.Unmap(), nil
}

// connectTest connects the test's QPs between the two zeroed handshakes
// (create_rdma_cm_connection).
func (cs *cmSide) connectTest(conn *perftest.Conn, qps []*verbs.QueuePair, sys perftest.SysData) error {
	if _, err := conn.HandShake(perftest.Dest{}); err != nil {
		return err
	}
	cs.params.PathMTU = sys.MTU.Bytes()
	for i, q := range qps {
		if err := cs.connect(q, true); err != nil {
			return fmt.Errorf("QP %d: %w", i, err)
		}
	}
	cs.cfg.srUsed = selectiveOn(qps)
	_, err := conn.HandShake(perftest.Dest{})
	return err
}

// connect makes one rdma_cm connection for q: the server takes the next
// request, the client dials. A refusal (nobody listens on the port) ends
// the exchange's connection at once, as perftest's rdma_client_connect
// fails on REJECTED; the test's connections (retry) are dialled again
// while the server refuses, for up to --timeout, as perftest's
// rdma_cm_client_connection retries while its server listens anew.
func (cs *cmSide) connect(q *verbs.QueuePair, retry bool) error {
	ctx, cancel := context.WithTimeout(cs.ctx, cs.cfg.timeout)
	defer cancel()
	p := cs.params
	if cs.l != nil {
		req, err := cs.l.Accept(ctx)
		if err != nil {
			return err
		}
		c, err := req.Accept(ctx, q, &p)
		if err != nil {
			return err
		}
		cs.conns = append(cs.conns, c)
		return nil
	}
	stop := sayIfSlow(cs.cfg.notice, fmt.Sprintf("no answer yet from %v (rdma_cm): waiting up to %v (--timeout) for its RoCE device", cs.peer, cs.cfg.timeout))
	defer stop()
	var refused error // the last refusal, for the error at the deadline
	for {
		c, err := cs.m.Dial(ctx, cs.peer, q, &p)
		if err == nil {
			cs.conns = append(cs.conns, c)
			return nil
		}
		if ctx.Err() != nil && refused != nil {
			// The deadline cut an attempt short: the refusals before it
			// say why the client gave up.
			return fmt.Errorf("%w (last refusal: %w)", ctx.Err(), refused)
		}
		if !retry && errors.Is(err, rdmacm.ErrRefused) {
			return fmt.Errorf("%w (nobody listens on port %d there: start the server first, the same test with -R and no peer address)", err, cs.peer.Port())
		}
		if !retry || !errors.Is(err, rdmacm.ErrRejected) {
			return err
		}
		refused = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-time.After(cmRetry):
		}
	}
}

// disconnect ends the test's connections, then the exchange's, and waits
// a little for each DREP. The server starts, as perftest's does at exit
// (the capture: its DREQs, the client's DREPs); the client waits for it
// first, so the two sides' DREQs do not cross, and disconnects only what
// the server left connected.
func (cs *cmSide) disconnect() {
	if len(cs.conns) == 0 {
		return
	}
	order := append(cs.conns[1:len(cs.conns):len(cs.conns)], cs.conns[0])
	linger := time.NewTimer(cmLinger)
	defer linger.Stop()
	if cs.l == nil {
		for _, c := range order {
			select {
			case <-c.Done():
			case <-linger.C:
			}
		}
		linger.Reset(cmLinger)
	}
	for _, c := range order {
		c.Disconnect()
		select {
		case <-c.Done():
		case <-linger.C:
		}
	}
}
