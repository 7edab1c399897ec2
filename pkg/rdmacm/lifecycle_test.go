package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// TestAcceptCancel: an Accept whose RTU never comes ends with the
// caller's deadline, and the connection is torn down on both sides (the
// passive side's DREQ reaches the active side, already established).
func TestAcceptCancel(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	h.setFilter(func(_, _ mad.GID, m mad.MAD) int {
		if m.Header().AttrID() == mad.AttrRTU {
			return 0
		}
		return 1
	})
	l, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	dialed := make(chan *Conn, 1)
	go func() {
		c, err := a.cm.Dial(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), a.qp(t), nil)
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	req, err := l.Accept(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := req.Accept(c, b.qp(t), nil); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept: %v, want ErrTimeout", err)
	}
	ca := <-dialed
	if ca == nil {
		t.FailNow()
	}
	select {
	case <-ca.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the active side was never disconnected")
	}
	expectEvents(t, ca, EventEstablished, EventDisconnected)
}

// TestListenerAndClose: a port is listened on once; closing a listener
// rejects the requests it held and ends its Accept; closing the CM ends
// every wait with ErrClosed.
func TestListenerAndClose(t *testing.T) {
	a, b, _ := pipePair(t, fastCM)
	l, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.cm.Listen(7174); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("second listen: %v, want ErrPortInUse", err)
	}
	dialErr := make(chan error, 1)
	go func() {
		_, err := a.cm.Dial(ctx(t), netip.AddrPortFrom(b.dev.Addr(), 7174), a.qp(t), nil)
		dialErr <- err
	}()
	// Wait until the request is in the backlog, then close the listener.
	waitFor(t, func() bool { return len(l.reqs) == 1 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-dialErr; !errors.Is(err, ErrRejected) {
		t.Fatalf("dial to a closed listener's backlog: %v, want ErrRejected", err)
	}
	if _, err := l.Accept(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("accept on a closed listener: %v, want ErrClosed", err)
	}
	// The port is free again.
	l2, err := b.cm.Listen(7174)
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan error, 1)
	go func() {
		_, err := l2.Accept(context.Background())
		accepting <- err
	}()
	// A Dial to a peer that never answers, pending when the CM closes.
	dialing := make(chan error, 1)
	go func() {
		_, err := a.cm.Dial(context.Background(), netip.MustParseAddrPort("10.9.9.9:1"), a.qp(t), nil)
		dialing <- err
	}()
	waitFor(t, func() bool { return a.cm.Counters().MADsOut >= 2 })
	a.cm.Close()
	b.cm.Close()
	if err := <-dialing; !errors.Is(err, ErrClosed) {
		t.Errorf("dial pending at close: %v, want ErrClosed", err)
	}
	if err := <-accepting; !errors.Is(err, ErrClosed) {
		t.Errorf("accept pending at close: %v, want ErrClosed", err)
	}
	if _, err := a.cm.Listen(1); !errors.Is(err, ErrClosed) {
		t.Errorf("listen after close: %v, want ErrClosed", err)
	}
}

// TestBadParams: what Dial and Accept refuse before sending anything.
func TestBadParams(t *testing.T) {
	a, b, h := pipePair(t, fastCM)
	dst := netip.AddrPortFrom(b.dev.Addr(), 7174)
	for _, tc := range []struct {
		name string
		dial func() error
	}{
		{"no QP", func() error { _, err := a.cm.Dial(ctx(t), dst, nil, nil); return err }},
		{"57 bytes of private data", func() error {
			_, err := a.cm.Dial(ctx(t), dst, a.qp(t), &Params{PrivateData: make([]byte, 57)})
			return err
		}},
		{"IPv6 from an IPv4 device", func() error {
			_, err := a.cm.Dial(ctx(t), netip.MustParseAddrPort("[2001:db8::1]:7174"), a.qp(t), nil)
			return err
		}},
		{"QP not in RESET or INIT", func() error {
			q := a.qp(t)
			if err := InitQP(q, 0); err != nil {
				return err
			}
			if err := q.Modify(&verbs.QPAttr{State: verbs.StateErr}, attrState); err != nil {
				return err
			}
			_, err := a.cm.Dial(ctx(t), dst, q, nil)
			return err
		}},
	} {
		if err := tc.dial(); !errors.Is(err, ErrBadParam) {
			t.Errorf("%s: %v, want ErrBadParam", tc.name, err)
		}
	}
	if n := len(h.sentOf(mad.AttrREQ)); n != 0 {
		t.Errorf("%d REQs sent", n)
	}
}
