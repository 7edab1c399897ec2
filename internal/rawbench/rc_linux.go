package rawbench

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// rcEnd is one end of the RC-shaped floor: its message's frames in
// transmit spans 0 to len(msg)-1 and its ACK in span len(msg), stamped in
// place before each send, and what it has received.
type rcEnd struct {
	r   *afxdp.Raw
	msg []int // frame lengths of the message's packets
	ack int   // frame length of the ACK
	psn bth.PSN
	// epsn is the next request PSN expected from the peer; last the PSN
	// of the peer's last packet of a message, which the ACK carries.
	epsn, last bth.PSN
	msn        uint32
	dec        bth.Frame
	done       bool // a whole message arrived since the last reset
	acked      bool // the peer acknowledged our last message
	hold       bool // an ACK waits for the next message's transmit (Config.HoldACK)
	err        error
	handle     func([]byte)
}

func newRCEnd(r *afxdp.Raw, p Path, size, pmtu int, psn, peer bth.PSN) (*rcEnd, error) {
	msg, err := RCMessage(p, true, size, pmtu, psn)
	if err != nil {
		return nil, err
	}
	ack, err := RCAck(p, 0)
	if err != nil {
		return nil, err
	}
	if len(msg)+1 > r.Spans() {
		return nil, fmt.Errorf("rc floor: %d packets, %d spans", len(msg)+1, r.Spans())
	}
	e := &rcEnd{r: r, psn: psn, epsn: peer, ack: len(ack)}
	for i, f := range append(msg, ack) {
		if len(f) > len(r.Span(i)) {
			return nil, fmt.Errorf("rc floor: a %d-byte frame over the interface's MTU", len(f))
		}
		copy(r.Span(i), f)
		if i < len(msg) {
			e.msg = append(e.msg, len(f))
		}
	}
	e.handle = e.receive
	return e, nil
}

// sendMessage stamps and queues the message's packets and sends them.
func (e *rcEnd) sendMessage() error {
	for i, n := range e.msg {
		if err := Stamp(e.r.Span(i)[:n], e.psn, 0); err != nil {
			return err
		}
		e.psn = e.psn.Next()
		if !e.r.QueueSpan(i, n) {
			return afxdp.ErrTxFull
		}
	}
	e.acked = false
	return e.r.Flush()
}

// sendAck acknowledges the peer's last message (its last PSN, the next
// MSN: IBA 9.7.5.1.3), at once unless the end holds it for its own next
// message, whose transmit takes it along.
func (e *rcEnd) sendAck() error {
	i := len(e.msg)
	e.msn = (e.msn + 1) & 0xffffff
	if err := Stamp(e.r.Span(i)[:e.ack], e.last, e.msn); err != nil {
		return err
	}
	if !e.r.QueueSpan(i, e.ack) {
		return afxdp.ErrTxFull
	}
	if e.hold {
		return nil
	}
	return e.r.Flush()
}

// receive checks one frame (headers, ICRC, PSN) and notes what it
// completes.
func (e *rcEnd) receive(frame []byte) {
	if err := Check(&e.dec, frame); err != nil {
		e.err = err
		return
	}
	h := e.dec.BTH()
	switch op := h.Opcode(); op {
	case bth.RCAcknowledge:
		if h.PSN() != e.psn.Add(-1) {
			e.err = fmt.Errorf("rc floor: ACK of PSN %d, sent up to %d", h.PSN(), e.psn.Add(-1))
			return
		}
		e.acked = true
	case bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteOnly:
		if h.PSN() != e.epsn {
			e.err = fmt.Errorf("rc floor: PSN %d, expected %d", h.PSN(), e.epsn)
			return
		}
		e.last, e.epsn = e.epsn, e.epsn.Next()
		if op == bth.RCWriteLast || op == bth.RCWriteOnly {
			e.done = true
		}
	default:
		e.err = fmt.Errorf("rc floor: unexpected %v", op)
	}
}

// echo answers each of the peer's messages with an ACK and then its own
// message, as the passive side of perftest's write_lat does, until stop.
func (e *rcEnd) echo(stop *atomic.Bool) error {
	for e.r.Wait(stop, time.Time{}) {
		e.r.Receive(e.handle)
		if e.err != nil {
			return e.err
		}
		if e.done {
			e.done = false
			if err := e.sendAck(); err != nil {
				return err
			}
			if err := e.sendMessage(); err != nil {
				return err
			}
		}
	}
	return nil
}

// pingPong runs len(rtt) round trips: send the message, wait for its ACK
// and the peer's message, acknowledge that, record the time.
func (e *rcEnd) pingPong(rtt []time.Duration) error {
	for i := range rtt {
		t0 := time.Now()
		if err := e.sendMessage(); err != nil {
			return err
		}
		deadline := t0.Add(5 * time.Second)
		for !e.done || !e.acked {
			if !e.r.Wait(nil, deadline) {
				return ErrNoReply
			}
			e.r.Receive(e.handle)
			if e.err != nil {
				return e.err
			}
		}
		e.done = false
		if err := e.sendAck(); err != nil {
			return err
		}
		rtt[i] = time.Since(t0)
	}
	return nil
}

// XDPRC measures the RC-shaped AF_XDP floor: the packets of an RC
// write_lat round trip (A's RDMA WRITE of size bytes in pmtu-sized
// packets, B's ACK, B's WRITE, A's ACK), each built once in place,
// re-stamped with its PSN (and MSN) and given a fresh ICRC before it is
// sent, and decoded with its ICRC and PSN checked when it arrives. It is
// what an RC transport cannot avoid on the same sockets; XDP, which moves
// one frame each way untouched, is what the wire alone costs. With
// cfg.HoldACK each ACK leaves with its end's next WRITE, one transmit a
// hop. Only the ping-pong is measured (Config.Blast is ignored).
func XDPRC(cfg Config, va, vb netns.Veth, a, b netip.Addr, size, pmtu int) (Result, error) {
	var r Result
	if cfg.Iters <= 0 {
		return r, nil
	}
	ra, rb, err := OpenXDPPair(cfg, va, vb)
	if err != nil {
		return r, err
	}
	defer ra.Close()
	defer rb.Close()
	const psnA, psnB = bth.PSN(0xfffff0), bth.PSN(0x123456) // A's wraps
	ea, err := newRCEnd(ra, Path{[6]byte(va.MAC), [6]byte(vb.MAC), a, b}, size, pmtu, psnA, psnB)
	if err != nil {
		return r, err
	}
	eb, err := newRCEnd(rb, Path{[6]byte(vb.MAC), [6]byte(va.MAC), b, a}, size, pmtu, psnB, psnA)
	if err != nil {
		return r, err
	}
	ea.hold, eb.hold = cfg.HoldACK, cfg.HoldACK
	var stop atomic.Bool
	var wg sync.WaitGroup
	var echoErr error
	wg.Go(func() { echoErr = eb.echo(&stop) })
	rtt := make([]time.Duration, cfg.Iters)
	err = cfg.warmUp(ea.pingPong)
	if err == nil {
		err = ea.pingPong(rtt)
	}
	stop.Store(true)
	wg.Wait()
	if echoErr != nil {
		return r, fmt.Errorf("rc floor echo: %w", echoErr)
	}
	if err != nil {
		return r, fmt.Errorf("rc floor ping-pong: %w", err)
	}
	r.Min, r.P50, r.P99 = Percentiles(rtt)
	return r, nil
}
