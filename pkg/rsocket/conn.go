package rsocket

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// Sizes, rsocket.c's defaults (def_mem, def_wmem, def_sqsize,
// def_rqsize, def_inline), which a C peer offers too unless it sets
// SO_RCVBUF or SO_SNDBUF.
const (
	recvBufSize = 1 << 17
	sendBufSize = 1 << 17
	queueDepth  = 384
	maxInline   = 64
	// ioMapSize is how many regions a peer may riomap toward us.
	ioMapSize = 8
	// closeTimeout bounds how long Close waits for the peer to take
	// what was written before it disconnects. rclose waits without a
	// bound; a lossy path's retransmissions can take seconds, and a
	// dead peer ends the wait sooner (retries exhausted).
	closeTimeout = 30 * time.Second
	// ackDelay is how long a stream's QP holds the ACK of a received
	// message for the answer the application may write back
	// (verbs.QPInit.AckDelay): a request and reply then cost one
	// transmit and one wake-up each way instead of two. Far below the
	// local ACK timeout (67 ms at rdma_cm's Timeout 14).
	ackDelay = 50 * time.Microsecond
)

// State bits (rsocket.c's rs_connected, rs_readable, rs_writable).
const (
	stConnected = 1 << iota
	stReadable
	stWritable
	stConnRdWr = stConnected | stReadable | stWritable
)

// recvFlag marks receive work requests' IDs (RS_WR_ID_FLAG_RECV); a send
// WR's ID is its message, so its completion says what it freed.
const recvFlag = 1 << 63

// want is what a blocked call waits for.
type want uint8

const (
	wantRead      want = iota // data, or no more of it
	wantWrite                 // room to send, or no more sending
	wantCtrl                  // a control message slot
	wantSendsDone             // every send completed
)

// Conn is an rsocket stream: a net.Conn over an RC QP. Reads and writes
// may run concurrently with each other; concurrent Reads (or Writes) take
// turns.
type Conn struct {
	dev   *verbs.Device
	ref   *cmRef
	rc    *rdmacm.Conn
	pd    *verbs.PD
	cq    *verbs.CQ
	qp    *verbs.QueuePair
	rmr   *verbs.MR // the receive ring, written by the peer
	smr   *verbs.MR // the send ring, read by our WRITEs
	tmr   *verbs.MR // our target SGL, written by the peer
	laddr Addr
	raddr Addr

	rlock, wlock sync.Mutex // serialize Reads, Writes (rsocket's rlock, slock)
	readWake     chan struct{}
	writeWake    chan struct{}
	done         chan struct{} // closed by Close
	closeOnce    sync.Once
	rdl, wdl     deadline

	mu       sync.Mutex // guards everything below (rsocket's cq_lock)
	state    int
	closed   bool
	shutWr   bool  // CloseWrite was called
	failed   error // the QP failed: a send completed in error
	closedAt time.Time

	// peerClosed says the peer's disconnect message came, and sentClose
	// that we sent ours. When only the peer's went, the peer's rshutdown
	// waits for our ACK of it, and disconnects once it has it.
	peerClosed, sentClose bool

	// Receive side.
	rbuf           []byte
	rbufOffset     int // next byte Read copies
	rbufFreeOffset int // the half to grant next
	rbufBytesAvail int // consumed and not yet granted
	rmsg           []uint32
	rmsgHead       int
	rmsgTail       int
	rseqNo         uint16 // messages consumed
	rseqComp       uint16 // rseqNo at which to send credits anyway
	remoteSGL      SGE    // the peer's target SGL
	remoteSGE      uint32 // the slot our next grant goes to
	peerOrder      binary.ByteOrder
	targetIOMap    [ioMapSize]IOMap // the regions the peer mapped for us

	// Send side.
	sbuf           []byte
	sbufPos        int
	sbufBytesAvail int
	target         [sglSize]SGE // where we may write next
	targetSGE      int
	nextSlot       int // the slot the peer's next grant lands in
	sseqNo         uint16
	sseqComp       uint16 // the peer's limit on sseqNo
	sqeAvail       int
	ctrlSeqno      uint32
	ctrlMaxSeqno   uint32
	remoteIOMap    SGE         // the peer's iomap table
	ioMaps         []*verbs.MR // our regions, by index in the peer's table

	// Reused for every post and poll: no allocation per message.
	wr      verbs.SendWR
	sgl     [2]verbs.SGE
	ctrlBuf [SGELen]byte
	recvWR  verbs.RecvWR
	wc      [32]verbs.WC
}

var _ net.Conn = (*Conn)(nil)

// newConn makes a connection's QP, CQ and buffers, with every receive
// posted, before the CM exchange (rs_create_ep).
func newConn(dev *verbs.Device, ref *cmRef) (*Conn, error) {
	c := &Conn{
		dev:          dev,
		ref:          ref,
		readWake:     make(chan struct{}, 1),
		writeWake:    make(chan struct{}, 1),
		done:         make(chan struct{}),
		rbuf:         make([]byte, recvBufSize),
		sbuf:         make([]byte, sendBufSize),
		rmsg:         make([]uint32, queueDepth+1),
		ctrlMaxSeqno: ctrlSize,
		sqeAvail:     queueDepth - ctrlSize,
	}
	c.rdl.init(c.readWake)
	c.wdl.init(c.writeWake)
	c.pd = dev.AllocPD()
	c.cq = dev.CreateCQ(2 * queueDepth)
	var err error
	c.qp, err = c.pd.CreateQP(&verbs.QPInit{
		SendCQ: c.cq, RecvCQ: c.cq, SignalAll: true, AckDelay: ackDelay,
		Cap: verbs.QPCap{MaxSendWR: queueDepth, MaxRecvWR: queueDepth, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: maxInline},
	})
	if err != nil {
		c.cq.Destroy()
		return nil, err
	}
	remote := verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	if c.rmr, err = c.pd.RegMR(c.rbuf, remote); err == nil {
		if c.smr, err = c.pd.RegMR(c.sbuf, verbs.AccessLocalWrite); err == nil {
			c.tmr, err = c.pd.RegMR(make([]byte, sglSize*SGELen+ioMapSize*IOMapLen), remote)
		}
	}
	if err == nil {
		err = rdmacm.InitQP(c.qp, remote)
	}
	c.recvWR = verbs.RecvWR{ID: recvFlag}
	for i := 0; err == nil && i < queueDepth; i++ {
		err = c.qp.PostRecv(&c.recvWR)
	}
	if err != nil {
		c.free()
		return nil, err
	}
	// rs_init_bufs: the first half of the ring goes out in the connect
	// message, the second in the first credit update.
	c.rbufFreeOffset = recvBufSize / 2
	c.rbufBytesAvail = recvBufSize / 2
	c.rseqComp = queueDepth / 2
	c.sbufBytesAvail = sendBufSize
	c.nextSlot = 1
	return c, nil
}

// connData is our connect message (rs_format_conn_data). Flags say
// little-endian, so peers write our target SGL in that order.
func (c *Conn) connData() []byte {
	cd := ConnData{
		Version:         Version,
		Flags:           FlagIOMap,
		TargetIOMapSize: valueToScale(ioMapSize),
		Credits:         queueDepth,
		TargetSGL:       SGE{Addr: c.tmr.Addr(), Key: c.tmr.RKey(), Length: sglSize},
		DataBuf:         SGE{Addr: c.rmr.Addr(), Key: c.rmr.RKey(), Length: recvBufSize / 2},
	}
	b := make([]byte, ConnDataLen)
	cd.Encode(b)
	return b
}

// established takes the peer's connect message (rs_save_conn_data) and
// opens the stream.
func (c *Conn) established(rc *rdmacm.Conn, peer ConnData) {
	c.rc = rc
	c.laddr = Addr{rc.LocalAddr()}
	c.raddr = Addr{rc.RemoteAddr()}
	c.mu.Lock()
	c.remoteSGL = peer.TargetSGL
	c.remoteSGE = 1
	c.peerOrder = sgeOrder(peer.Flags)
	c.target[0] = peer.DataBuf
	c.sseqComp = peer.Credits
	if peer.Flags&FlagIOMap != 0 {
		// The iomap table follows the target SGL (rs_save_conn_data).
		c.remoteIOMap = SGE{
			Addr:   peer.TargetSGL.Addr + SGELen*uint64(peer.TargetSGL.Length),
			Key:    peer.TargetSGL.Key,
			Length: uint32(scaleToValue(peer.TargetIOMapSize)),
		}
		c.ioMaps = make([]*verbs.MR, c.remoteIOMap.Length)
	}
	c.state = stConnRdWr
	// Grant the second half of the ring now rather than at the first
	// Read: a peer that only writes needs it.
	c.updateCredits()
	c.mu.Unlock()
}

// free releases the verbs resources.
func (c *Conn) free() {
	if c.qp != nil {
		c.qp.Destroy()
	}
	for _, m := range []*verbs.MR{c.rmr, c.smr, c.tmr} {
		if m != nil {
			m.Dereg()
		}
	}
	c.cq.Destroy()
}

// Read reads from the stream; after the peer's CloseWrite or Close, and
// once everything it wrote is read, it returns io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	c.rlock.Lock()
	defer c.rlock.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opError("read", net.ErrClosed)
	}
	if c.rdl.expired() {
		return 0, c.opError("read", errDeadline)
	}
	if len(b) == 0 {
		return 0, nil
	}
	if !c.haveRData() {
		if err := c.wait(wantRead, c.readWake, &c.rdl); err != nil {
			return 0, c.opError("read", err)
		}
		if !c.haveRData() {
			if c.failed != nil {
				return 0, c.opError("read", c.failed)
			}
			return 0, io.EOF
		}
	}
	// rrecv: copy message by message, a partly read one keeps its rest.
	n := 0
	for n < len(b) && c.haveRData() {
		size := int(c.rmsg[c.rmsgHead])
		if left := len(b) - n; left < size {
			c.rmsg[c.rmsgHead] -= uint32(left)
			size = left
		} else {
			c.rseqNo++
			if c.rmsgHead++; c.rmsgHead == len(c.rmsg) {
				c.rmsgHead = 0
			}
		}
		if end := len(c.rbuf) - c.rbufOffset; size > end {
			n += copy(b[n:], c.rbuf[c.rbufOffset:])
			c.rbufOffset = 0
			c.rbufBytesAvail += end
			size -= end
		}
		n += copy(b[n:n+size], c.rbuf[c.rbufOffset:])
		c.rbufOffset += size
		c.rbufBytesAvail += size
	}
	c.updateCredits()
	return n, nil
}

// Write writes b, blocking while the peer has granted no room.
func (c *Conn) Write(b []byte) (int, error) {
	c.wlock.Lock()
	defer c.wlock.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opError("write", net.ErrClosed)
	}
	if c.wdl.expired() {
		return 0, c.opError("write", errDeadline)
	}
	n := 0
	olen := olapStart
	for n < len(b) {
		if !c.canSend() {
			if err := c.wait(wantWrite, c.writeWake, &c.wdl); err != nil {
				return n, c.opError("write", err)
			}
		}
		if c.state&stWritable == 0 {
			return n, c.opError("write", c.writeErr())
		}
		left := len(b) - n
		size := left
		if olen < left {
			size = olen
			if olen < maxTransfer {
				olen <<= 1
			}
		}
		size = min(size, c.sbufBytesAvail, int(c.target[c.targetSGE].Length))
		if err := c.writeData(b[n:n+size], size); err != nil {
			return n, c.opError("write", err)
		}
		n += size
	}
	return n, nil
}

func (c *Conn) writeErr() error {
	switch {
	case c.shutWr:
		return ErrShutdown
	case c.failed != nil:
		return c.failed
	}
	return ErrReset
}

// canSend is rs_can_send: a send WR, RS_SNDLOWAT of send buffer, a
// credit, and room in the peer's ring.
func (c *Conn) canSend() bool {
	return c.sqeAvail > 0 && c.sbufBytesAvail >= sndLowat &&
		c.sseqNo != c.sseqComp && c.target[c.targetSGE].Length != 0
}

// fill sets c.wr up to send p, len(p) == size, as rsend and riowrite
// do: inline when small, else copied into the send ring, in two pieces
// where it wraps.
func (c *Conn) fill(p []byte, size int, op verbs.WROpcode) {
	c.wr = verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled}
	if size <= maxInline {
		c.wr.Flags |= verbs.SendInline
		c.wr.InlineData = p
		return
	}
	lkey, base := c.smr.LKey(), c.smr.Addr()
	if end := len(c.sbuf) - c.sbufPos; size <= end {
		copy(c.sbuf[c.sbufPos:], p)
		c.sgl[0] = verbs.SGE{Addr: base + uint64(c.sbufPos), Length: uint32(size), LKey: lkey}
		c.wr.SGL = c.sgl[:1]
		if c.sbufPos += size; c.sbufPos == len(c.sbuf) {
			c.sbufPos = 0
		}
		return
	}
	end := len(c.sbuf) - c.sbufPos
	copy(c.sbuf[c.sbufPos:], p[:end])
	copy(c.sbuf, p[end:])
	c.sgl[0] = verbs.SGE{Addr: base + uint64(c.sbufPos), Length: uint32(end), LKey: lkey}
	c.sgl[1] = verbs.SGE{Addr: base, Length: uint32(size - end), LKey: lkey}
	c.wr.SGL = c.sgl[:2]
	c.sbufPos = size - end
}

// writeData sends p, len(p) == size, as one WRITE WITH IMMEDIATE into the
// peer's ring (rs_write_data).
func (c *Conn) writeData(p []byte, size int) error {
	c.fill(p, size, verbs.WRWriteWithImm)
	// Take the room before posting: the peer may grant the slot again
	// the moment the data lands.
	t := &c.target[c.targetSGE]
	c.wr.RemoteAddr, c.wr.RKey = t.Addr, t.Key
	t.Addr += uint64(size)
	t.Length -= uint32(size)
	if t.Length == 0 {
		c.targetSGE = (c.targetSGE + 1) % sglSize
	}
	c.sseqNo++
	c.sqeAvail--
	c.sbufBytesAvail -= size
	msg := MakeMsg(OpData, uint32(size))
	c.wr.Imm, c.wr.ID = uint32(msg), uint64(msg)
	return c.post()
}

// post posts c.wr and forgets its buffers.
func (c *Conn) post() error {
	err := c.qp.PostSend(&c.wr)
	c.wr.InlineData, c.wr.SGL = nil, nil
	if err != nil {
		c.fail(err)
	}
	return err
}

// fail ends the stream after a local error.
func (c *Conn) fail(err error) {
	if c.failed == nil {
		c.failed = err
	}
	c.state = 0
}

// postMsg sends a message with no data: a zero-length WRITE WITH
// IMMEDIATE (rs_post_msg).
func (c *Conn) postMsg(m Msg) error {
	c.wr = verbs.SendWR{Opcode: verbs.WRWriteWithImm, Flags: verbs.SendSignaled, Imm: uint32(m), ID: uint64(m)}
	return c.post()
}

// haveRData is rs_have_rdata.
func (c *Conn) haveRData() bool { return c.rmsgHead != c.rmsgTail }

// ready reports whether a call waiting for w may go on.
func (c *Conn) ready(w want) bool {
	switch w {
	case wantRead:
		return c.haveRData() || c.state&stReadable == 0
	case wantWrite:
		return c.canSend() || c.state&stWritable == 0
	case wantCtrl:
		return c.ctrlAvail() || c.state&stConnected == 0
	}
	return c.allSendsDone()
}

func (c *Conn) ctrlAvail() bool { return c.ctrlSeqno != c.ctrlMaxSeqno }

// allSendsDone is rs_conn_all_sends_done.
func (c *Conn) allSendsDone() bool {
	return int(c.ctrlMaxSeqno-c.ctrlSeqno)+c.sqeAvail == queueDepth || c.state&stConnected == 0
}

// wait polls and sleeps, with c.mu held (it lets go while it sleeps),
// until w is ready, the deadline passes, or Close is called (for Read and
// Write). Completions wake it through the CQ's channel; a deadline, a
// call that made the other direction ready, or Close through wake and
// done.
func (c *Conn) wait(w want, wake chan struct{}, dl *deadline) error {
	for {
		c.poll()
		closing := w == wantRead || w == wantWrite
		if closing && c.closed {
			return net.ErrClosed
		}
		if c.ready(w) {
			return nil
		}
		if dl.expired() {
			return errDeadline
		}
		c.mu.Unlock()
		if closing {
			select {
			case <-c.cq.Notify():
			case <-wake:
			case <-c.rc.Done():
			case <-c.done:
			}
		} else {
			select {
			case <-c.cq.Notify():
			case <-wake:
			case <-c.rc.Done():
			}
		}
		c.mu.Lock()
	}
}

// poll takes the completions and answers them (rs_process_cq's body,
// without the wait), with c.mu held.
func (c *Conn) poll() {
	// A peer gone at the CM (DREQ, or the QP failed) ends the stream,
	// but only after the completions that came before it are read.
	gone := false
	select {
	case <-c.rc.Done():
		gone = true
	default:
	}
	c.updateCredits()
	posts, any := 0, false
	for {
		n := c.cq.Poll(c.wc[:])
		if n == 0 {
			break
		}
		any = true
		for i := range c.wc[:n] {
			if c.complete(&c.wc[i]) {
				posts++
			}
		}
	}
	if gone && c.state&stConnected != 0 {
		c.state = 0
	}
	for ; posts > 0 && c.state&stConnected != 0; posts-- {
		if err := c.qp.PostRecv(&c.recvWR); err != nil {
			c.fail(err)
		}
	}
	c.updateCredits()
	if any || gone {
		// The other direction may be waiting on what came.
		signal(c.readWake)
		signal(c.writeWake)
	}
}

// complete handles one completion (rs_poll_cq's loop body) and reports
// whether it used up a receive WR.
func (c *Conn) complete(wc *verbs.WC) bool {
	if wc.WRID&recvFlag != 0 {
		if wc.Status != verbs.WCSuccess || wc.Flags&verbs.WCWithImm == 0 {
			return false // flushed, or not rsocket's
		}
		m := Msg(wc.Imm)
		switch m.Op() {
		case OpSGL:
			c.sseqComp = uint16(m.Data())
			if wc.ByteLen >= SGELen {
				// The peer wrote a grant into the next slot of our
				// target SGL (rs_send_credits); it stays ours until we
				// have written all of it.
				c.target[c.nextSlot] = DecodeSGE(c.tmr.Buf()[c.nextSlot*SGELen:], binary.LittleEndian)
				c.nextSlot = (c.nextSlot + 1) % sglSize
			}
		case OpCtrl:
			switch Ctrl(m.Data()) {
			case CtrlDisconnect:
				c.state = 0
				c.peerClosed = true
			case CtrlShutdown:
				if c.state&stWritable != 0 {
					c.state &^= stReadable
				} else {
					c.state = 0
				}
			}
		case OpIOMapSGL:
			// The peer wrote a table entry (rs_send_iomaps); keep a copy
			// for IOWrite.
			if i := m.Data(); i < ioMapSize && wc.ByteLen >= IOMapLen {
				off := sglSize*SGELen + int(i)*IOMapLen
				c.targetIOMap[i] = DecodeIOMap(c.tmr.Buf()[off:], binary.LittleEndian)
			}
		case OpData:
			c.rmsg[c.rmsgTail] = m.Data()
			if c.rmsgTail++; c.rmsgTail == len(c.rmsg) {
				c.rmsgTail = 0
			}
		}
		return true
	}
	m := Msg(wc.WRID)
	switch m.Op() {
	case OpSGL:
		c.ctrlMaxSeqno++
	case OpCtrl:
		c.ctrlMaxSeqno++
		if Ctrl(m.Data()) == CtrlDisconnect {
			c.state = 0
		}
	case OpIOMapSGL:
		c.sqeAvail++
		c.sbufBytesAvail += IOMapLen
	default: // data, and IOWrite's plain WRITEs
		c.sqeAvail++
		c.sbufBytesAvail += int(m.Data())
	}
	if wc.Status != verbs.WCSuccess && c.state&stConnected != 0 {
		c.fail(&net.OpError{Op: "send", Net: network, Err: syscall.EIO})
	}
	return false
}

// updateCredits is rs_update_credits: grant the freed half of the ring,
// or only new credits, once half the ring is free or half the credits
// are used.
func (c *Conn) updateCredits() {
	half := len(c.rbuf) / 2
	if !(c.rbufBytesAvail >= half || int16(c.rseqNo-c.rseqComp) >= 0) ||
		!c.ctrlAvail() || c.state&stConnected == 0 {
		return
	}
	c.ctrlSeqno++
	c.rseqComp = c.rseqNo + queueDepth/2
	m := MakeMsg(OpSGL, uint32(c.rseqNo+queueDepth))
	if c.rbufBytesAvail < half {
		c.postMsg(m)
		return
	}
	sge := SGE{Addr: c.rmr.Addr() + uint64(c.rbufFreeOffset), Key: c.rmr.RKey(), Length: uint32(half)}
	sge.Encode(c.ctrlBuf[:], c.peerOrder)
	c.wr = verbs.SendWR{
		Opcode: verbs.WRWriteWithImm, Flags: verbs.SendSignaled | verbs.SendInline,
		ID: uint64(m), Imm: uint32(m), InlineData: c.ctrlBuf[:],
		RemoteAddr: c.remoteSGL.Addr + uint64(c.remoteSGE)*SGELen, RKey: c.remoteSGL.Key,
	}
	c.post()
	c.rbufBytesAvail -= half
	if c.rbufFreeOffset += half; c.rbufFreeOffset >= len(c.rbuf) {
		c.rbufFreeOffset = 0
	}
	if c.remoteSGE++; c.remoteSGE == c.remoteSGL.Length {
		c.remoteSGE = 0
	}
}

// shutdown sends the control message for how (rshutdown), with c.mu
// held, and waits up to dl for every send to complete.
func (c *Conn) shutdown(rd, wr bool, dl *deadline) error {
	if c.state&stConnected == 0 {
		return nil
	}
	var ctrl Ctrl
	switch {
	case rd && wr:
		ctrl = CtrlDisconnect
		c.state &^= stReadable | stWritable
	case wr:
		c.state &^= stWritable
		ctrl = CtrlDisconnect
		if c.state&stReadable != 0 {
			ctrl = CtrlShutdown
		}
	}
	if !c.ctrlAvail() {
		if err := c.wait(wantCtrl, c.writeWake, dl); err != nil {
			return err
		}
	}
	if c.state&stConnected != 0 && c.ctrlAvail() {
		c.ctrlSeqno++
		c.sentClose = ctrl == CtrlDisconnect
		if err := c.postMsg(MakeMsg(OpCtrl, uint32(ctrl))); err != nil {
			return err
		}
	}
	return c.wait(wantSendsDone, c.writeWake, dl)
}

// CloseWrite shuts down the writing side: the peer reads what was
// written, then io.EOF (rshutdown SHUT_WR). It waits, up to the write
// deadline, until the peer has taken every byte.
func (c *Conn) CloseWrite() error {
	c.wlock.Lock()
	defer c.wlock.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("close", net.ErrClosed)
	}
	c.shutWr = true
	if err := c.shutdown(false, true, &c.wdl); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// Close ends the stream gracefully: calls blocked in Read or Write return
// net.ErrClosed, the peer gets rsocket's disconnect after the data
// already written (waiting up to 30 s for it to land), then the CM's
// DREQ. Close returns once the peer answers it. When the peer's
// disconnect came first, Close waits, within the same 30 s, for the
// peer's own DREQ instead, answering its retransmissions meanwhile: the
// peer's rshutdown waits until every message it sent is acknowledged.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() { first = true })
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	c.mu.Lock()
	c.closed = true
	close(c.done)
	var dl deadline
	dl.init(c.writeWake)
	dl.set(time.Now().Add(closeTimeout))
	err := c.shutdown(true, true, &dl)
	dl.set(time.Time{})
	// The peer closed first: its last messages are acknowledged, but
	// an ACK lost on the way leaves it retransmitting, and a QP in error
	// would never answer (rxe retries forever at rsocket's retry count
	// of 7). Leave the QP answering until the peer, its sends all done,
	// disconnects itself.
	linger := c.peerClosed && !c.sentClose && c.failed == nil
	c.mu.Unlock()
	c.rdl.set(time.Time{})
	c.wdl.set(time.Time{})
	timeout := time.NewTimer(closeTimeout)
	defer timeout.Stop()
	if linger {
		select {
		case <-c.rc.Done(): // the peer's DREQ
		case <-timeout.C:
		}
	}
	c.rc.Disconnect()
	select {
	case <-c.rc.Done(): // the peer's DREP, or its own DREQ
	case <-timeout.C:
	}
	// Keep the QP until the CM leaves time-wait: its number stays bound
	// to the old connection until then (IBA 12.9.8.3.1), and a new QP
	// would get the same one. Later calls on the device free it, so no
	// goroutine outlives Close.
	c.closedAt = time.Now()
	c.ref.bury(c)
	c.ref.release()
	if err != nil {
		return c.opError("close", err)
	}
	return nil
}

// timewaitOver reports whether the CM is done with the QP: it left
// time-wait, or the close was long ago. The caller holds cms.
func (c *Conn) timewaitOver() bool {
	for {
		select {
		case e := <-c.rc.Events():
			if e.Type == rdmacm.EventTimewaitExit {
				return true
			}
			continue
		default:
		}
		return time.Since(c.closedAt) > closeTimeout
	}
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the time after which Read fails with an error
// that wraps os.ErrDeadlineExceeded; the zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rdl.set(t); return nil }

// SetWriteDeadline is SetReadDeadline for Write and CloseWrite.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// signal wakes whoever waits on ch, if anyone, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deadline is one direction's deadline and the timer that wakes a call
// blocked past it; set it any time, from any goroutine.
type deadline struct {
	mu    sync.Mutex
	t     time.Time
	timer *time.Timer
}

func (d *deadline) init(wake chan struct{}) {
	d.timer = time.AfterFunc(time.Hour, func() { signal(wake) })
	d.timer.Stop()
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	d.t = t
	d.timer.Stop()
	if !t.IsZero() {
		// A time already past fires at once and wakes the call.
		d.timer.Reset(time.Until(t))
	}
	d.mu.Unlock()
}

func (d *deadline) expired() bool {
	d.mu.Lock()
	t := d.t
	d.mu.Unlock()
	return !t.IsZero() && !time.Now().Before(t)
}
