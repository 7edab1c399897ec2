package waiter

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	busy    = 1 << iota // the owner is inside a call
	closing             // Close has begun; no call may start
)

// Waiter fences a link's owner against Close and is what the owner sleeps
// in. Make one with New.
type Waiter struct {
	state  atomic.Uint32
	exited chan struct{} // the owner left a call that Close interrupted
	done   chan struct{} // Close has freed the link
	efd    int
	pfd    []unix.PollFd // the link's descriptors, then the eventfd
	out    [2]unix.PollFd
	// wakers counts Wakes in progress and freed says Free has begun: a
	// Wake that finds freed set writes nothing, and Free closes the
	// eventfd only once no Wake is left that could still write to it.
	// Without them a Wake racing Close wrote to a closed descriptor,
	// whose number the process may already have given to another file.
	wakers atomic.Int32
	freed  atomic.Bool
	// ep is an epoll instance watching the descriptors, itself
	// registered with the Go runtime's poller, so that Wait parks the
	// goroutine rather than its thread (openEpoll); nil when the runtime
	// would not take it, and Wait falls back to ppoll(2).
	ep    *os.File
	epfd  int
	raw   syscall.RawConn
	ready func(fd uintptr) bool // w.epReady, made once: no allocation a Wait
	evs   [1]unix.EpollEvent    // epReady asks only whether any is ready
	// probe, when set (SetProbe), tells without a system call whether
	// input is waiting; polls counts epReady's calls in one Wait.
	probe func() bool
	polls int
	// joined: the descriptors are in ep; calls: the owner's calls since
	// its last Wait (idleCalls).
	joined bool
	calls  int
	// kicked is a Wake not yet spent. With ep, a Wake sets it and moves
	// ep's read deadline into the past, which readies a parked Wait in
	// the runtime alone: no system call, and the goroutine runs next on
	// the waker's P.
	kicked atomic.Bool
}

// New makes a Waiter whose Wait watches fds for input; PollOut watches
// fds[0] for room.
func New(fds ...int) (*Waiter, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	w := &Waiter{exited: make(chan struct{}, 1), done: make(chan struct{}), efd: efd}
	for _, fd := range fds {
		w.pfd = append(w.pfd, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	w.pfd = append(w.pfd, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	if len(fds) > 0 {
		w.out = [2]unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLOUT}, {Fd: int32(efd), Events: unix.POLLIN}}
	}
	w.epfd = -1
	w.openEpoll()
	return w, nil
}

// openEpoll makes w.ep. Waiting through the runtime's poller matters to a
// device's goroutine that sleeps between packets: in ppoll(2) it holds its
// P and its thread, the runtime's monitor takes the P back after 20 µs
// and polls every 20 µs meanwhile, and every packet or Wake is a thread
// wake-up. Parked in the poller, the goroutine frees both, and the thread
// that parks the next goroutine finds it ready in its own netpoll (issue
// 14: a paced round trip on two started devices took 70 to 110 % of a
// core at 10 000 calls a second, a third of it in context switches and
// the monitor).
func (w *Waiter) openEpoll() {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	// The descriptors join the instance when a Wait needs them (join,
	// idleCalls); adding them once here proves the instance takes them.
	for _, p := range w.pfd[:len(w.pfd)-1] { // not the eventfd: see kicked
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: p.Fd}
		if unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(p.Fd), &ev) != nil ||
			unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, int(p.Fd), nil) != nil {
			unix.Close(epfd)
			return
		}
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	if unix.SetNonblock(epfd, true) != nil {
		unix.Close(epfd)
		return
	}
	f := os.NewFile(uintptr(epfd), "waiter-epoll")
	raw, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil {
		f.Close() // not in the poller: ppoll it is
		return
	}
	w.ep, w.epfd, w.raw = f, epfd, raw
	w.ready = w.epReady
}

// epReady reports whether a descriptor is readable, without waiting; the
// runtime parks the caller until the epoll instance is when it is not.
//
// Only its first call in a Wait looks. The runtime resets the instance's
// readiness before that call, so an arrival the runtime's poller saw
// earlier must be found by looking: the probe's rings, or an epoll_wait
// of the instance. A later call follows a wake-up by the poller, whose
// epoll_wait found the instance readable (the kernel asks the instance's
// descriptors before it reports it), so it answers yes without a system
// call. A descriptor drained since then costs the owner one empty
// receive, where the look cost every sleep a system call (12 % of the
// CPU of a round trip between two started afxdp devices).
func (w *Waiter) epReady(uintptr) bool {
	if w.polls++; w.polls > 1 {
		return true
	}
	if w.probe != nil {
		return w.probe()
	}
	n, err := unix.EpollWait(w.epfd, w.evs[:], 0)
	return err == nil && n > 0
}

// SetProbe gives Wait a way to tell, without a system call, whether input
// is waiting (an AF_XDP socket's receive ring): a Wait in the runtime's
// poller then looks there before it parks instead of asking the epoll
// instance. Call it before the first Wait.
func (w *Waiter) SetProbe(probe func() bool) { w.probe = probe }

// A descriptor in the epoll instance makes every packet's arrival run the
// instance's callbacks and wake a thread in the runtime's netpoll. An
// owner that sleeps between packets wants that; one that busy-polls and
// never waits pays it on the receive path (write_lat over afxdp took 0.4
// to 1 µs longer a one-way in each of six cells, three alternated runs).
// So Wait adds the descriptors and leaves them in, and after idleCalls
// calls of the owner without a Wait, Enter takes them out. Taking them
// out after every Wait instead cost LatencyBackground 3 µs (two system
// calls a sleep).
const idleCalls = 256

// join adds the descriptors to the epoll instance (in) or takes them out.
func (w *Waiter) join(in bool) {
	op := unix.EPOLL_CTL_DEL
	if in {
		op = unix.EPOLL_CTL_ADD
	}
	for _, p := range w.pfd[:len(w.pfd)-1] {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: p.Fd}
		unix.EpollCtl(w.epfd, op, int(p.Fd), &ev)
	}
	w.joined = in
}

// Enter begins a call of the owner. It returns false when the link is
// closed or closing; then the call must not touch the link's resources.
// Two goroutines inside the data path at once break the link's contract;
// Enter panics rather than let them corrupt its buffers.
func (w *Waiter) Enter() bool {
	if w.state.CompareAndSwap(0, busy) {
		if w.joined {
			if w.calls++; w.calls > idleCalls {
				w.join(false)
			}
		}
		return true
	}
	if w.state.Load()&closing != 0 {
		return false
	}
	panic("link: data path used by two goroutines at once")
}

// Exit ends a call that Enter began.
func (w *Waiter) Exit() {
	if w.state.CompareAndSwap(busy, 0) {
		return
	}
	// Close came in meanwhile and is waiting for us.
	w.state.Store(closing)
	w.exited <- struct{}{}
}

// Closing reports whether Close has begun; spinning waits check it.
func (w *Waiter) Closing() bool { return w.state.Load()&closing != 0 }

// Close marks the link closed, wakes the owner and waits until it is out
// of its call; then the first caller runs free (which must end with Free)
// and every caller returns once free has run.
func (w *Waiter) Close(free func()) {
	for {
		s := w.state.Load()
		if s&closing != 0 {
			<-w.done
			return
		}
		if w.state.CompareAndSwap(s, s|closing) {
			if s&busy != 0 {
				w.wake()
				<-w.exited
			}
			free()
			close(w.done)
			return
		}
	}
}

// past is a deadline that has passed: setting it readies a parked Wait.
var past = time.Unix(1, 0)

func (w *Waiter) wake() {
	if w.ep != nil {
		w.kicked.Store(true)
		w.ep.SetReadDeadline(past)
		if w.state.Load()&closing == 0 {
			return
		}
		// Close: the owner may be in PollOut, which still waits in
		// ppoll on the eventfd.
	}
	one := [8]byte{1}
	unix.Write(w.efd, one[:])
}

// Free closes the eventfd. Call it last, from the function given to Close
// or when the link fails to open.
func (w *Waiter) Free() {
	w.freed.Store(true)
	for w.wakers.Load() != 0 {
		runtime.Gosched() // a Wake is between its check and its write
	}
	if w.ep != nil {
		w.ep.Close()
		w.ep = nil
	}
	if w.efd >= 0 {
		unix.Close(w.efd)
		w.efd = -1
	}
}

// Wait sleeps until one of the descriptors is readable, the timeout passes
// (negative: never) or Close wakes it, which it reports as closed. Call it
// between Enter and Exit.
func (w *Waiter) Wait(timeout time.Duration) (closed bool, err error) {
	if w.ep != nil {
		return w.waitPoller(timeout)
	}
	var ts *unix.Timespec
	var t unix.Timespec
	if timeout >= 0 {
		t = unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	for {
		_, err := unix.Ppoll(w.pfd, ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("ppoll: %w", err)
		}
		if w.pfd[len(w.pfd)-1].Revents == 0 {
			return false, nil
		}
		// The eventfd fired: Close, or a Wake. Drain it so a Wake ends
		// one Wait only; a Close leaves the state word saying so.
		var buf [8]byte
		unix.Read(w.efd, buf[:])
		return w.state.Load()&closing != 0, nil
	}
}

// waitPoller is Wait parked in the runtime's poller.
func (w *Waiter) waitPoller(timeout time.Duration) (closed bool, err error) {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := w.ep.SetReadDeadline(deadline); err != nil {
		return false, fmt.Errorf("epoll deadline: %w", err)
	}
	w.calls = 0
	if !w.joined {
		w.join(true)
	}
	// A Wake before the deadline was set moved an older one: its flag
	// says so. One after it moves this one.
	if w.kicked.Swap(false) {
		return w.state.Load()&closing != 0, nil
	}
	w.polls = 0
	err = w.raw.Read(w.ready)
	closed = w.state.Load()&closing != 0
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.kicked.Store(false) // the Wake, if any, ended this Wait
		return closed, nil
	}
	if err != nil {
		return closed, fmt.Errorf("epoll wait: %w", err)
	}
	return closed, nil
}

// Wake ends the owner's Wait in progress, or else its next one; any
// goroutine may call it.
func (w *Waiter) Wake() {
	w.wakers.Add(1)
	if !w.freed.Load() {
		w.wake()
	}
	w.wakers.Add(-1)
}

// PollOut waits up to d for room to send on the first descriptor and
// reports whether there is some; Close cuts the wait short.
func (w *Waiter) PollOut(d time.Duration) bool {
	ts := unix.NsecToTimespec(int64(d))
	w.out[0].Revents, w.out[1].Revents = 0, 0
	n, err := unix.Ppoll(w.out[:], &ts, nil)
	if err != nil || n == 0 {
		return false
	}
	if w.out[0].Revents&unix.POLLOUT != 0 {
		return true
	}
	if w.Closing() {
		return false
	}
	// The eventfd holds a Wake meant for the owner's next Wait: leave it
	// there and wait for room on the socket alone, or Send would drop a
	// batch for a Wake.
	w.out[0].Revents = 0
	n, err = unix.Ppoll(w.out[:1], &ts, nil)
	return err == nil && n > 0 && w.out[0].Revents&unix.POLLOUT != 0
}
