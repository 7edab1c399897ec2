package afxdp_test

import (
	"errors"
	"testing"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/xdp"
)

// TestSharedMultiBuffer: a socket sharing a multi-buffer owner's UMEM, as a
// link on a 9000-MTU multi-queue interface would open it, binds and is
// multi-buffer: the kernel refuses any flag beside XDP_SHARED_UMEM on a
// sharer's bind (xsk_bind: EINVAL), and the sharer takes multi-buffer from
// its owner. Asking multi-buffer of a sharer whose owner lacks it is a
// configuration error.
func TestSharedMultiBuffer(t *testing.T) {
	netns.RequireRoot(t)
	va, _ := multiQueuePair(t)
	var o, s *xdp.Socket
	err := va.NS.Do(func() (err error) {
		if o, err = xdp.Open(xdp.Config{Ifindex: va.Index, Queue: 0, NumFrames: 64, Mode: xdp.BindCopy, MultiBuffer: true}); err != nil {
			return err
		}
		s, err = xdp.Open(xdp.Config{Ifindex: va.Index, Queue: 1, Shared: o, MultiBuffer: true})
		return err
	})
	if s != nil {
		defer s.Close()
	}
	if o != nil {
		defer o.Close()
	}
	if err != nil {
		t.Fatalf("shared multi-buffer socket: %v", err)
	}
	if !s.MultiBuffer() {
		t.Error("sharer of a multi-buffer UMEM reports MultiBuffer() false")
	}

	// A fresh pair: the kernel releases a closed socket's queue
	// asynchronously, so binding queue 0 again at once can be EBUSY.
	vb, _ := multiQueuePair(t)
	err = vb.NS.Do(func() error {
		plain, err := xdp.Open(xdp.Config{Ifindex: vb.Index, Queue: 0, NumFrames: 64, Mode: xdp.BindCopy})
		if err != nil {
			return err
		}
		defer plain.Close()
		if _, err := xdp.Open(xdp.Config{Ifindex: vb.Index, Queue: 1, Shared: plain, MultiBuffer: true}); !errors.Is(err, xdp.ErrConfig) {
			t.Errorf("multi-buffer sharer of a plain owner: %v, want ErrConfig", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSharedZeroCopyRefused: BindZeroCopy promises ErrZeroCopy when the
// socket cannot be zero-copy, and a sharer of a copy-mode owner cannot:
// the kernel binds it with its owner's flags.
func TestSharedZeroCopyRefused(t *testing.T) {
	netns.RequireRoot(t)
	va, _ := multiQueuePair(t)
	var o, s *xdp.Socket
	err := va.NS.Do(func() (err error) {
		if o, err = xdp.Open(xdp.Config{Ifindex: va.Index, Queue: 0, NumFrames: 64, Mode: xdp.BindCopy}); err != nil {
			return err
		}
		s, err = xdp.Open(xdp.Config{Ifindex: va.Index, Queue: 1, Shared: o, Mode: xdp.BindZeroCopy})
		return err
	})
	if s != nil {
		defer s.Close()
	}
	if o != nil {
		defer o.Close()
	}
	if err == nil {
		t.Fatalf("BindZeroCopy sharer of a copy-mode owner bound (ZeroCopy %v), want ErrZeroCopy", s.ZeroCopy())
	}
	if !errors.Is(err, xdp.ErrZeroCopy) {
		t.Fatalf("BindZeroCopy sharer of a copy-mode owner: %v, want ErrZeroCopy", err)
	}
}
