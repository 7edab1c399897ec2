package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// Queue sizes, rping's: RPING_SQ_DEPTH sends, two receives, a CQ for both.
const (
	sqDepth = 16
	rqDepth = 2
)

// errDisconnected: the peer disconnected (the server's normal end).
var errDisconnected = errors.New("disconnected")

// session is one connection's objects, rping's struct rping_cb: a QP and
// its CQ, the 16-byte receive and send buffers of the advertisements, the
// RDMA buffer (the client's sink, the server's READ target and WRITE
// source) and the client's source buffer.
type session struct {
	pd    *verbs.PD
	cq    *verbs.CQ
	qp    *verbs.QueuePair
	msg   *verbs.MR // [0,16) receives, [16,32) sends
	rdma  *verbs.MR
	start *verbs.MR // client only
	size  int
	conn  *rdmacm.Conn

	wc      [8]verbs.WC
	pending []verbs.WC
}

func newSession(d *verbs.Device, size int, client bool) (s *session, err error) {
	s = &session{pd: d.AllocPD(), cq: d.CreateCQ(2 * sqDepth), size: size}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.qp, err = s.pd.CreateQP(&verbs.QPInit{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	if s.msg, err = s.pd.AllocMR(2*infoSize, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	rw := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	if s.rdma, err = s.pd.AllocMR(size, rw); err != nil {
		return nil, err
	}
	if client {
		if s.start, err = s.pd.AllocMR(size, rw); err != nil {
			return nil, err
		}
	}
	// INIT now, so the receive is there before the peer can send (rping
	// posts it before rdma_connect and rdma_accept).
	if err = rdmacm.InitQP(s.qp, 0); err != nil {
		return nil, err
	}
	if err = s.postRecv(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) close() {
	if s.qp != nil {
		s.qp.Destroy()
	}
	for _, m := range []*verbs.MR{s.msg, s.rdma, s.start} {
		if m != nil {
			m.Dereg()
		}
	}
	s.cq.Destroy()
}

func (s *session) postRecv() error {
	return s.qp.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{s.msg.SGE(0, infoSize)}})
}

// send posts one 16-byte message: an advertisement, or the server's "go
// ahead" (whose bytes rping never looks at).
func (s *session) send(i info) error {
	i.marshal(s.msg.Buf()[infoSize:])
	return s.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s.msg.SGE(infoSize, infoSize)}})
}

// rdmaOp posts a READ into, or a WRITE from, the first n bytes of the
// RDMA buffer.
func (s *session) rdmaOp(op verbs.WROpcode, n int, remote info) error {
	return s.qp.PostSend(&verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s.rdma.SGE(0, n)},
		RemoteAddr: remote.Addr, RKey: remote.RKey})
}

// await waits for the next completion of kind want, as rping's CQ thread
// and semaphore do: SEND completions pass by, a receive is posted again at
// once, and a flushed WR means the connection is gone.
func (s *session) await(ctx context.Context, want verbs.WCOpcode) (verbs.WC, error) {
	for {
		for len(s.pending) > 0 {
			w := s.pending[0]
			s.pending = s.pending[1:]
			switch {
			case w.Status == verbs.WCWRFlushErr:
				return w, errDisconnected
			case w.Status != verbs.WCSuccess:
				return w, fmt.Errorf("cq completion failed status %d (%v)", w.Status, w.Status)
			case w.Opcode == verbs.WCSend:
				continue
			case w.Opcode == verbs.WCRecv:
				if err := s.postRecv(); err != nil {
					return w, fmt.Errorf("post recv error: %w", err)
				}
			}
			if w.Opcode != want {
				return w, fmt.Errorf("completion %v, want %v", w.Opcode, want)
			}
			return w, nil
		}
		n, err := s.cq.Wait(ctx, s.wc[:])
		if err != nil {
			if s.conn != nil {
				select {
				case <-s.conn.Done():
					return verbs.WC{}, errDisconnected
				default:
				}
			}
			return verbs.WC{}, err
		}
		s.pending = append(s.pending[:0], s.wc[:n]...)
	}
}

// cstring is the NUL-terminated string at the front of b (rping prints
// its buffers with %s).
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// fill writes rping_test_client's ping: "rdma-ping-N: ", then letters
// from start cycling through 'A'..'z', and a NUL at the end.
func fill(b []byte, ping int, start byte) {
	n := copy(b, fmt.Sprintf("rdma-ping-%d: ", ping))
	c := start
	for i := n; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// client runs rping_test_client: count pings (0: until stopped), each an
// advertisement of the source buffer (the server READs it), then of the
// sink (the server WRITEs it back), each answered by a "go ahead".
func (s *session) client(ctx context.Context, count int, verbose, validate bool, out io.Writer) error {
	start := byte(65)
	for ping := 0; count == 0 || ping < count; ping++ {
		fill(s.start.Buf(), ping, start)
		if start++; start > 122 {
			start = 65
		}
		if err := s.send(info{Addr: s.start.Addr(), RKey: s.start.RKey(), Size: uint32(s.size)}); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if err := s.goAhead(ctx); err != nil {
			return fmt.Errorf("wait for RDMA_WRITE_ADV: %w", err)
		}
		if err := s.send(info{Addr: s.rdma.Addr(), RKey: s.rdma.RKey(), Size: uint32(s.size)}); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if err := s.goAhead(ctx); err != nil {
			return fmt.Errorf("wait for RDMA_WRITE_COMPLETE: %w", err)
		}
		if validate && !bytes.Equal(s.start.Buf(), s.rdma.Buf()) {
			return errors.New("data mismatch!")
		}
		if verbose {
			fmt.Fprintf(out, "ping data: %s\n", cstring(s.rdma.Buf()))
		}
	}
	return nil
}

func (s *session) goAhead(ctx context.Context) error {
	w, err := s.await(ctx, verbs.WCRecv)
	if err == nil && w.ByteLen != infoSize {
		err = fmt.Errorf("received bogus data, size %d", w.ByteLen)
	}
	return err
}

// server runs rping_test_server until the client disconnects: READ what
// the client advertises, say go ahead, WRITE it back to the sink it
// advertises next, say go ahead.
func (s *session) server(ctx context.Context, verbose bool, out io.Writer) error {
	for {
		src, err := s.advert(ctx)
		if err != nil {
			return err
		}
		if int(src.Size) > s.size {
			return fmt.Errorf("the client's %d bytes do not fit our %d (give both the same -S)", src.Size, s.size)
		}
		if err := s.rdmaOp(verbs.WRRead, int(src.Size), src); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if _, err := s.await(ctx, verbs.WCRead); err != nil {
			return fmt.Errorf("wait for RDMA_READ_COMPLETE: %w", err)
		}
		if verbose {
			fmt.Fprintf(out, "server ping data: %s\n", cstring(s.rdma.Buf()))
		}
		if err := s.send(info{}); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		sink, err := s.advert(ctx)
		if err != nil {
			return err
		}
		// strlen + 1, as rping: the string and its NUL.
		n := min(len(cstring(s.rdma.Buf()))+1, s.size, int(sink.Size))
		if err := s.rdmaOp(verbs.WRWrite, n, sink); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if _, err := s.await(ctx, verbs.WCWrite); err != nil {
			return fmt.Errorf("wait for RDMA_WRITE_COMPLETE: %w", err)
		}
		if err := s.send(info{}); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
	}
}

// advert waits for the client's next advertisement.
func (s *session) advert(ctx context.Context) (info, error) {
	w, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return info{}, err
	}
	return parseInfo(s.msg.Buf()[:w.ByteLen])
}
