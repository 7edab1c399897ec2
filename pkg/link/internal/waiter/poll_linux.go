package waiter

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Poll parks in Go's network poller, so that a sleeping goroutine holds no
// thread and no P: a goroutine asleep in a system call (Wait's ppoll)
// keeps its P until the runtime's monitor takes it back, tens of µs to
// ms later, and meanwhile a goroutine it readied waits; with two devices
// asleep on a two-core machine nothing else ran. The poller watches one
// descriptor per file, for output as well as input, and a UDP socket is
// writable again after every datagram it sends, so the Waiter keeps an
// epoll instance of its own that watches the link's descriptors and the
// eventfd for input only, and gives the poller that one descriptor: it
// becomes readable whenever one of them gets input.
type poller struct {
	// pollers counts goroutines inside Poll: Free waits for them to
	// leave before it closes the eventfd that Poll drains.
	pollers atomic.Int32
	f       *os.File
	rc      syscall.RawConn
	ready   func() bool        // the current Poll's; one Poll at a time
	check   func(uintptr) bool // calls ready; made once, so Poll allocates nothing
}

// InitPoll sets up Poll, once, before the link is used; without it (or if
// it fails) Poll sleeps in short steps.
func (w *Waiter) InitPoll() {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	for _, p := range w.pfd {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: p.Fd}
		if unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(p.Fd), &ev) != nil {
			unix.Close(epfd)
			return
		}
	}
	if unix.SetNonblock(epfd, true) != nil {
		unix.Close(epfd)
		return
	}
	f := os.NewFile(uintptr(epfd), "waiter")
	rc, err := f.SyscallConn()
	// A file the poller does not hold has no deadlines.
	if err != nil || f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return
	}
	p := &poller{f: f, rc: rc}
	p.check = func(uintptr) bool { return p.ready() }
	w.poll = p
}

// CanPoll reports whether Poll parks in the network poller (else it
// sleeps in short steps).
func (w *Waiter) CanPoll() bool { return w.poll != nil }

// freePoll ends a Poll in progress and waits until it has left, before
// the descriptors it watches go; Close has begun.
func (w *Waiter) freePoll() {
	if w.poll == nil {
		return
	}
	w.poll.f.Close()
	for w.poll.pollers.Load() != 0 {
		runtime.Gosched()
	}
}

// Poll parks the calling goroutine in Go's network poller until one of the
// descriptors may have got input, Wake is called, the deadline set with
// PollDeadline passes (none at first) or Close frees the Waiter, which it reports as closed. It
// calls ready first and after each wake-up, and returns once ready
// reports true. It needs no Enter: the owner may be another goroutine,
// inside a call meanwhile. One goroutine polls at a time.
func (w *Waiter) Poll(ready func() bool) (closed bool, err error) {
	p := w.poll
	if p == nil {
		if !ready() {
			time.Sleep(50 * time.Microsecond)
		}
		return w.Closing(), nil
	}
	p.pollers.Add(1)
	defer p.pollers.Add(-1)
	if w.Closing() {
		return true, nil
	}
	p.ready = ready
	err = p.rc.Read(p.check)
	p.ready = nil
	if w.woken.Swap(false) {
		// The eventfd stays readable until read, and the poller hears
		// only of new input: drain it so that the next Wake is new.
		var buf [8]byte
		unix.Read(w.efd, buf[:])
	}
	switch {
	case w.Closing():
		return true, nil
	case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, err
}

// PollDeadline sets the deadline of the Poll in progress and of later
// ones (zero: none); any goroutine may call it.
func (w *Waiter) PollDeadline(deadline time.Time) {
	if w.poll != nil {
		w.poll.f.SetReadDeadline(deadline)
	}
}
