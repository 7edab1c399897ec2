package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// exchange runs an RC SEND, WRITE and READ from a to b over a connection
// and checks the bytes.
func exchange(t *testing.T, a, b *side, ca, cb *Conn) {
	t.Helper()
	if err := cb.QP().PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 256)}}); err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello over rdma_cm")
	if err := ca.QP().PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline, InlineData: msg}); err != nil {
		t.Fatal(err)
	}
	if w := a.wc(t); w.Status != verbs.WCSuccess || w.WRID != 2 {
		t.Fatalf("SEND completion %+v", w)
	}
	if w := b.wc(t); w.Status != verbs.WCSuccess || w.Opcode != verbs.WCRecv || int(w.ByteLen) != len(msg) {
		t.Fatalf("receive completion %+v", w)
	}
	if got := b.mr.Buf()[:len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("received %q, want %q", got, msg)
	}

	src := a.mr.Buf()[1024:3072]
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := ca.QP().PostSend(&verbs.SendWR{ID: 3, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(1024, 2048)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if w := a.wc(t); w.Status != verbs.WCSuccess || w.WRID != 3 {
		t.Fatalf("WRITE completion %+v", w)
	}
	if !bytes.Equal(b.mr.Buf()[8192:8192+2048], src) {
		t.Fatal("WRITE: the peer's memory differs")
	}

	remote := b.mr.Buf()[16384 : 16384+3000]
	for i := range remote {
		remote[i] = byte(i*13 + 5)
	}
	if err := ca.QP().PostSend(&verbs.SendWR{ID: 4, Opcode: verbs.WRRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(32768, 3000)}, RemoteAddr: b.mr.Addr() + 16384, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if w := a.wc(t); w.Status != verbs.WCSuccess || w.WRID != 4 {
		t.Fatalf("READ completion %+v", w)
	}
	if !bytes.Equal(a.mr.Buf()[32768:32768+3000], remote) {
		t.Fatal("READ: the local copy differs")
	}
}

// waitEvent returns the next event of c.
func waitEvent(t *testing.T, c *Conn) Event {
	t.Helper()
	select {
	case e := <-c.Events():
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func expectEvents(t *testing.T, c *Conn, want ...EventType) {
	t.Helper()
	for _, w := range want {
		if e := waitEvent(t, c); e.Type != w {
			t.Fatalf("event %v, want %v", e.Type, w)
		}
	}
}

func TestDialAcceptDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name         string
		activeCloses bool
	}{
		{"active disconnects", true},
		{"passive disconnects", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, _ := pipePair(t, fastCM)
			ca, cb := connect(t, a, b, 7174, []byte("from the client"), []byte("from the server"))

			if !bytes.HasPrefix(ca.PrivateData(), []byte("from the server")) || len(ca.PrivateData()) != mad.REPPrivateDataLen {
				t.Errorf("active side's private data %q", ca.PrivateData())
			}
			if !bytes.HasPrefix(cb.PrivateData(), []byte("from the client")) || len(cb.PrivateData()) != maxREQData {
				t.Errorf("passive side's private data %q", cb.PrivateData())
			}
			if cb.RemoteAddr().Addr() != a.dev.Addr() || cb.LocalAddr() != netip.AddrPortFrom(b.dev.Addr(), 7174) || ca.RemoteAddr() != cb.LocalAddr() || cb.RemoteAddr() != ca.LocalAddr() {
				t.Errorf("addresses: active %v→%v, passive %v→%v", ca.LocalAddr(), ca.RemoteAddr(), cb.LocalAddr(), cb.RemoteAddr())
			}
			aa, ab := ca.Attr(), cb.Attr()
			if aa.DestQPN != cb.QP().QPN() || ab.DestQPN != ca.QP().QPN() || aa.SQPSN != ab.RQPSN || aa.RQPSN != ab.SQPSN {
				t.Errorf("QPNs and PSNs do not match: active %+v, passive %+v", aa, ab)
			}
			if aa.PathMTU.Bytes() != a.dev.MaxPathMTU() || ab.PathMTU != aa.PathMTU {
				t.Errorf("path MTU %v/%v, want %d", aa.PathMTU, ab.PathMTU, a.dev.MaxPathMTU())
			}
			if aa.MaxRdAtomic != 1 || ab.MaxDestRdAtomic != 1 || aa.RetryCount != 7 || aa.RNRRetry != 7 || ab.RNRRetry != 7 {
				t.Errorf("negotiated depths and retries: active %+v, passive %+v", aa, ab)
			}
			for _, c := range []*Conn{ca, cb} {
				if s := c.QP().State(); s != verbs.StateRTS {
					t.Errorf("QP %#x in %v, want RTS", c.QP().QPN(), s)
				}
			}
			expectEvents(t, ca, EventEstablished)
			expectEvents(t, cb, EventEstablished)

			exchange(t, a, b, ca, cb)
			exchange(t, b, a, cb, ca)

			closer, other := ca, cb
			if !tc.activeCloses {
				closer, other = cb, ca
			}
			if err := closer.Disconnect(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*Conn{closer, other} {
				select {
				case <-c.Done():
				case <-time.After(20 * time.Second):
					t.Fatal("not disconnected")
				}
				expectEvents(t, c, EventDisconnected, EventTimewaitExit)
				if s := c.QP().State(); s != verbs.StateErr {
					t.Errorf("QP %#x in %v after disconnect, want ERR", c.QP().QPN(), s)
				}
			}
			// A second Disconnect of either side is a no-op.
			if err := other.Disconnect(); err != nil {
				t.Errorf("second disconnect: %v", err)
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, a, b *side, h *hub) // before the dial
		dst     func(b *side) netip.AddrPort
		timeout time.Duration
		want    []error
		reason  mad.RejectReason
	}{
		{
			name: "nobody listens",
			dst:  func(b *side) netip.AddrPort { return netip.AddrPortFrom(b.dev.Addr(), 1) },
			want: []error{ErrRejected, ErrRefused}, reason: mad.RejInvalidServiceID,
		},
		{
			name: "rejected with private data",
			setup: func(t *testing.T, a, b *side, h *hub) {
				l, err := b.cm.Listen(7174)
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					req, err := l.Accept(context.Background())
					if err == nil {
						req.Reject([]byte("go away"))
					}
				}()
			},
			dst:  func(b *side) netip.AddrPort { return netip.AddrPortFrom(b.dev.Addr(), 7174) },
			want: []error{ErrRejected}, reason: mad.RejConsumerDefined,
		},
		{
			name: "no peer at the address",
			dst:  func(b *side) netip.AddrPort { return netip.MustParseAddrPort("10.9.9.9:7174") },
			want: []error{ErrUnreachable},
		},
		{
			name: "peer never answers REQs",
			setup: func(t *testing.T, a, b *side, h *hub) {
				h.setFilter(func(src, dst mad.GID, m mad.MAD) int {
					if m.Header().AttrID() == mad.AttrREQ {
						return 0
					}
					return 1
				})
			},
			dst:  func(b *side) netip.AddrPort { return netip.AddrPortFrom(b.dev.Addr(), 7174) },
			want: []error{ErrUnreachable},
		},
		{
			name: "listener never accepts: the caller's deadline",
			setup: func(t *testing.T, a, b *side, h *hub) {
				if _, err := b.cm.Listen(7174); err != nil {
					t.Fatal(err)
				}
			},
			dst:     func(b *side) netip.AddrPort { return netip.AddrPortFrom(b.dev.Addr(), 7174) },
			timeout: 100 * time.Millisecond,
			want:    []error{ErrTimeout, context.DeadlineExceeded},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, h := pipePair(t, fastCM)
			if tc.setup != nil {
				tc.setup(t, a, b, h)
			}
			c := ctx(t)
			if tc.timeout != 0 {
				var cancel context.CancelFunc
				c, cancel = context.WithTimeout(c, tc.timeout)
				defer cancel()
			}
			q := a.qp(t)
			conn, err := a.cm.Dial(c, tc.dst(b), q, nil)
			if err == nil {
				t.Fatalf("dial connected: %v", conn.Attr())
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("dial: %v, want %v", err, w)
				}
			}
			var rej *RejectError
			if errors.As(err, &rej) != (tc.reason != 0) || rej != nil && rej.Reason != tc.reason {
				t.Errorf("dial: %v, want reason %v", err, tc.reason)
			}
			if rej != nil && tc.reason == mad.RejConsumerDefined && !bytes.HasPrefix(rej.PrivateData, []byte("go away")) {
				t.Errorf("REJ private data %q", rej.PrivateData)
			}
			// The QP is free for another connection afterwards.
			if err := a.cm.do(func(time.Time) {
				if a.cm.byQPN[q.QPN()] != nil {
					t.Errorf("QP %#x still held", q.QPN())
				}
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDialCancelWithdraws: a Dial whose context is cancelled withdraws its
// REQ with REJ "timeout" (as ib_cm's cm_destroy_id does), so the request
// the listener holds can no longer be accepted.
func TestDialCancelWithdraws(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	l, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := a.cm.Dial(c, netip.AddrPortFrom(b.dev.Addr(), 7174), a.qp(t), nil)
		errc <- err
	}()
	req, err := l.Accept(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("dial: %v, want ErrCanceled", err)
	}
	rejs := h.sentOf(mad.AttrREJ)
	if len(rejs) != 1 || rejs[0].REJ().Reason() != mad.RejTimeout {
		t.Fatalf("REJs sent: %d, want one with reason timeout", len(rejs))
	}
	// Once the passive side has taken the REJ in, the request is gone.
	for b.cm.Counters().MADsIn < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err = req.Accept(ctx(t), b.qp(t), nil); !errors.Is(err, ErrBadState) {
		t.Fatalf("accept of a withdrawn request: %v, want ErrBadState", err)
	}
}
