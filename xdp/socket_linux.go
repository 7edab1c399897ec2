package xdp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Errors returned by this package.
var (
	// ErrConfig is returned for an invalid Config.
	ErrConfig = errors.New("invalid xdp config")
	// ErrClosed is returned by methods of a closed Socket.
	ErrClosed = errors.New("xdp socket closed")
	// ErrZeroCopy is returned when BindZeroCopy was asked for and the
	// driver refused it.
	ErrZeroCopy = errors.New("zero-copy not supported")
)

// BindMode selects how the socket exchanges frames with the driver.
type BindMode int

const (
	// BindAuto tries zero-copy and falls back to copy mode.
	BindAuto BindMode = iota
	// BindCopy makes the kernel copy frames between its buffers and the UMEM.
	BindCopy
	// BindZeroCopy has the driver use UMEM frames directly; it fails with
	// ErrZeroCopy if the driver cannot.
	BindZeroCopy
)

func (m BindMode) String() string {
	switch m {
	case BindAuto:
		return "auto"
	case BindCopy:
		return "copy"
	case BindZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("BindMode(%d)", int(m))
}

// Defaults used for zero Config fields.
const (
	DefaultFrameSize = 4096
	DefaultNumFrames = 4096
	DefaultRingSize  = 2048
	// MaxFrags is the most descriptors one multi-buffer frame may use: the
	// kernel builds at most MAX_SKB_FRAGS (17) fragments plus the head.
	MaxFrags = 18
)

// Config configures Open.
type Config struct {
	// Ifindex and Queue name the interface and receive/transmit queue the
	// socket binds to (in the calling thread's network namespace).
	Ifindex int
	Queue   int
	// FrameSize is the UMEM chunk size: a power of two between 2048 and
	// the page size (aligned mode). Default DefaultFrameSize.
	FrameSize int
	// NumFrames is the number of chunks in the UMEM. Default DefaultNumFrames.
	NumFrames int
	// Headroom is reserved by the kernel in front of each received frame
	// (XDP_UMEM_REG headroom), on top of XDP_PACKET_HEADROOM.
	Headroom int
	// Ring sizes, powers of two. Default DefaultRingSize each.
	FillSize, CompletionSize, RXSize, TXSize int
	// Mode chooses copy or zero-copy binding.
	Mode BindMode
	// NoNeedWakeup disables XDP_USE_NEED_WAKEUP (then every transmit needs
	// a Kick and the kernel polls Fill on its own).
	NoNeedWakeup bool
	// MultiBuffer binds with XDP_USE_SG, so frames larger than a chunk are
	// received and sent as chains of descriptors.
	MultiBuffer bool
	// BusyPoll, when positive, enables busy polling: SO_PREFER_BUSY_POLL,
	// SO_BUSY_POLL with this duration (µs resolution) and
	// SO_BUSY_POLL_BUDGET of BusyPollBudget (default 64).
	BusyPoll       time.Duration
	BusyPollBudget int
	// TxBudget, when positive, raises how many descriptors one sendto
	// transmits in copy mode (XDP_MAX_TX_SKB_BUDGET, Linux 6.17+; the
	// kernel default is 32). Failure to set it is ignored.
	TxBudget int
	// Shared, if set, makes this socket share Shared's UMEM (XDP_SHARED_UMEM)
	// with its own Fill and Completion rings, as a socket on another queue
	// of the same device must. NumFrames, FrameSize and Headroom are then
	// taken from Shared, which must outlive this socket, and so are the
	// bind mode, need_wakeup and multi-buffer (the kernel binds a sharer
	// with its owner's flags): BindZeroCopy with a copy-mode owner fails
	// with ErrZeroCopy, BindCopy with a zero-copy owner or MultiBuffer
	// with an owner without it with ErrConfig.
	Shared *Socket
}

// Socket is an AF_XDP socket with its UMEM and rings. It is not safe for
// concurrent use; see the package documentation.
type Socket struct {
	Fill       FillRing
	Completion CompletionRing
	RX         RXRing
	TX         TXRing

	fd        int
	umem      []byte
	ownUMEM   bool
	maps      [][]byte
	cfg       Config
	zeroCopy  bool
	busyPoll  bool
	txBudget  bool
	closed    bool
	pollfd    [1]unix.PollFd
	kicks     uint64
	wakeups   uint64
	needWake  bool
	multiBuff bool
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

func (c *Config) setDefaults() error {
	if c.Shared != nil {
		c.FrameSize = c.Shared.cfg.FrameSize
		c.NumFrames = c.Shared.cfg.NumFrames
		c.Headroom = c.Shared.cfg.Headroom
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.NumFrames == 0 {
		c.NumFrames = DefaultNumFrames
	}
	for _, p := range []*int{&c.FillSize, &c.CompletionSize, &c.RXSize, &c.TXSize} {
		if *p == 0 {
			*p = DefaultRingSize
		}
		if !isPow2(*p) {
			return fmt.Errorf("ring size %d: %w: not a power of two", *p, ErrConfig)
		}
	}
	if !isPow2(c.FrameSize) || c.FrameSize < 2048 || c.FrameSize > unix.Getpagesize() {
		return fmt.Errorf("frame size %d: %w", c.FrameSize, ErrConfig)
	}
	if c.Ifindex <= 0 || c.Queue < 0 || c.NumFrames <= 0 || c.Headroom < 0 {
		return fmt.Errorf("ifindex %d queue %d frames %d: %w", c.Ifindex, c.Queue, c.NumFrames, ErrConfig)
	}
	if c.BusyPollBudget == 0 {
		c.BusyPollBudget = 64
	}
	return nil
}

// Open creates, configures and binds an AF_XDP socket. With BindAuto it
// binds in zero-copy mode if the driver supports it and in copy mode
// otherwise; ZeroCopy says which.
func Open(cfg Config) (*Socket, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if o := cfg.Shared; o != nil {
		// A sharer takes its owner's mode (see open).
		switch {
		case cfg.Mode == BindZeroCopy && !o.zeroCopy:
			return nil, fmt.Errorf("%w: the shared UMEM's owner is bound in copy mode", ErrZeroCopy)
		case cfg.Mode == BindCopy && o.zeroCopy:
			return nil, fmt.Errorf("%w: copy mode asked, the shared UMEM's owner is zero-copy", ErrConfig)
		case cfg.MultiBuffer && !o.multiBuff:
			return nil, fmt.Errorf("%w: multi-buffer asked, the shared UMEM's owner is not", ErrConfig)
		}
		return open(cfg, o.zeroCopy)
	}
	switch cfg.Mode {
	case BindCopy:
		return open(cfg, false)
	case BindZeroCopy:
		s, err := open(cfg, true)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrZeroCopy, err)
		}
		return s, nil
	}
	s, err := open(cfg, true)
	if err == nil {
		return s, nil
	}
	// A failed bind leaves nothing behind that matters, but starting over
	// keeps the copy-mode socket free of any half state.
	s, err2 := open(cfg, false)
	if err2 != nil {
		return nil, fmt.Errorf("zero-copy: %v; copy: %w", err, err2)
	}
	return s, nil
}

func open(cfg Config, zeroCopy bool) (_ *Socket, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	s := &Socket{fd: fd, cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	if cfg.Shared != nil {
		s.umem = cfg.Shared.umem
	} else {
		if s.umem, err = mapUMEM(cfg.FrameSize * cfg.NumFrames); err != nil {
			return nil, err
		}
		s.ownUMEM = true
		if err = registerUMEM(fd, s.umem, cfg.FrameSize, cfg.Headroom); err != nil {
			return nil, fmt.Errorf("register umem: %w", err)
		}
	}
	for _, o := range []struct{ opt, n int }{
		{unix.XDP_UMEM_FILL_RING, cfg.FillSize},
		{unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionSize},
		{unix.XDP_RX_RING, cfg.RXSize},
		{unix.XDP_TX_RING, cfg.TXSize},
	} {
		if err = unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return nil, fmt.Errorf("ring size option %d: %w", o.opt, err)
		}
	}
	off, err := mmapOffsets(fd)
	if err != nil {
		return nil, fmt.Errorf("mmap offsets: %w", err)
	}
	for _, m := range []func() ([]byte, error){
		func() ([]byte, error) {
			return mapRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, uint32(cfg.FillSize), &s.Fill.r)
		},
		func() ([]byte, error) {
			return mapRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, uint32(cfg.CompletionSize), &s.Completion.r)
		},
		func() ([]byte, error) {
			return mapRing(fd, unix.XDP_PGOFF_RX_RING, off.Rx, uint32(cfg.RXSize), &s.RX.r)
		},
		func() ([]byte, error) {
			return mapRing(fd, unix.XDP_PGOFF_TX_RING, off.Tx, uint32(cfg.TXSize), &s.TX.r)
		},
	} {
		mem, err := m()
		if err != nil {
			return nil, err
		}
		s.maps = append(s.maps, mem)
	}
	// Producer rings start with every entry free.
	s.Fill.r.cachedCons = s.Fill.r.size
	s.TX.r.cachedCons = s.TX.r.size

	if cfg.BusyPoll > 0 {
		// All three or none: SO_PREFER_BUSY_POLL (5.11+) keeps softirqs from
		// racing the busy poller; the others set its time and batch.
		us := int(cfg.BusyPoll / time.Microsecond)
		if us == 0 {
			us = 1
		}
		e1 := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1)
		e2 := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, us)
		e3 := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, cfg.BusyPollBudget)
		s.busyPoll = e1 == nil && e2 == nil && e3 == nil
	}

	var flags uint16
	if zeroCopy {
		flags |= unix.XDP_ZEROCOPY
	} else {
		flags |= unix.XDP_COPY
	}
	if !cfg.NoNeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
	}
	if cfg.MultiBuffer {
		flags |= unix.XDP_USE_SG
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	needWake, multiBuff := !cfg.NoNeedWakeup, cfg.MultiBuffer
	if o := cfg.Shared; o != nil {
		// xsk_bind refuses any other flag beside XDP_SHARED_UMEM: a
		// sharer binds in its owner's mode, with its need_wakeup and
		// multi-buffer settings (Open checked the Config agrees).
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(o.fd)
		zeroCopy, needWake, multiBuff = o.zeroCopy, o.needWake, o.multiBuff
	}
	if err = bindRetry(fd, sa); err != nil {
		return nil, fmt.Errorf("bind ifindex %d queue %d (%s): %w", cfg.Ifindex, cfg.Queue, modeName(zeroCopy), err)
	}
	s.zeroCopy = zeroCopy
	s.needWake = needWake
	s.multiBuff = multiBuff
	if cfg.TxBudget > 0 {
		s.txBudget = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, cfg.TxBudget) == nil
	}
	s.pollfd[0] = unix.PollFd{Fd: int32(fd)}
	return s, nil
}

// busyWait bounds how long bindRetry waits for a queue to come free.
const busyWait = 2 * time.Second

// bindRetry binds fd, trying again on EBUSY for up to busyWait. The kernel
// frees a closed socket's hold on its queue in deferred work (xsk_release
// drops the buffer pool, whose release clears the queue's pool from a
// work queue, xp_release_deferred), so a socket opened right after another
// on the same queue closed, as a restarted service does, can find the
// queue held for a moment. A queue that a live socket holds still fails,
// with EBUSY, after the wait.
func bindRetry(fd int, sa *unix.SockaddrXDP) error {
	deadline := time.Now().Add(busyWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := unix.Bind(fd, sa)
		if err != unix.EBUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

func modeName(zc bool) string {
	if zc {
		return "zero-copy"
	}
	return "copy"
}

// FD returns the socket's file descriptor, for an XSKMAP.
func (s *Socket) FD() int { return s.fd }

// UMEM returns the frame memory; frame addresses are offsets into it.
func (s *Socket) UMEM() []byte { return s.umem }

// FrameSize returns the UMEM chunk size.
func (s *Socket) FrameSize() int { return s.cfg.FrameSize }

// NumFrames returns the number of UMEM chunks.
func (s *Socket) NumFrames() int { return s.cfg.NumFrames }

// ZeroCopy reports whether the socket is bound in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// BusyPoll reports whether busy polling was enabled.
func (s *Socket) BusyPoll() bool { return s.busyPoll }

// MultiBuffer reports whether the socket was bound with XDP_USE_SG.
func (s *Socket) MultiBuffer() bool { return s.multiBuff }

// Kick asks the kernel to transmit what the TX ring holds (sendto). With
// need_wakeup it does so only when the kernel set the TX flag. EAGAIN,
// EBUSY and ENOBUFS are transient (the kernel stopped part-way, the driver
// is busy or out of buffers) and are not errors: call Kick again later.
// ENETDOWN is returned.
//
// In copy mode one sendto transmits at most the TX budget (32 by default)
// descriptors and returns EAGAIN if more remain, so Kick repeats while the
// ring still holds descriptors, at most TX-size/32 times.
func (s *Socket) Kick() error {
	if s.closed {
		return ErrClosed
	}
	if s.needWake && !s.TX.NeedWakeup() {
		return nil
	}
	for range s.cfg.TXSize/32 + 1 {
		s.kicks++
		switch e := kick(s.fd); e {
		case 0:
			return nil
		case unix.EAGAIN:
			// Only repeat while descriptors remain queued.
			if s.TX.r.cachedProd == loadConsumer(&s.TX.r) {
				return nil
			}
		case unix.EBUSY, unix.ENOBUFS:
			return nil
		default:
			return fmt.Errorf("sendto: %w", e)
		}
	}
	return nil
}

// WakeRX makes a non-blocking recvfrom when the Fill ring's need_wakeup
// flag is set, or always with busy polling, where it runs the device's
// NAPI on this CPU. It reports errors other than EAGAIN.
func (s *Socket) WakeRX() error {
	if s.closed {
		return ErrClosed
	}
	if !s.busyPoll && s.needWake && !s.Fill.NeedWakeup() {
		return nil
	}
	if !s.busyPoll && !s.needWake {
		return nil
	}
	s.wakeups++
	switch e := recvWake(s.fd); e {
	case 0, unix.EAGAIN, unix.EBUSY:
		return nil
	default:
		return fmt.Errorf("recvfrom: %w", e)
	}
}

// Poll waits up to timeout (negative: forever) for the socket to become
// readable (a received descriptor is ready) and reports whether it is.
// poll(2) also serves a Fill need_wakeup.
func (s *Socket) Poll(timeout time.Duration) (bool, error) {
	if s.closed {
		return false, ErrClosed
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	s.pollfd[0].Events = unix.POLLIN
	s.pollfd[0].Revents = 0
	n, err := unix.Poll(s.pollfd[:], ms)
	if err != nil && err != unix.EINTR {
		return false, fmt.Errorf("poll: %w", err)
	}
	return n > 0 && s.pollfd[0].Revents&unix.POLLIN != 0, nil
}

// Stats are the kernel's per-socket counters (XDP_STATISTICS) and this
// package's system call counts.
type Stats struct {
	unix.XDPStatistics
	// Kicks counts sendto calls, Wakeups recvfrom calls.
	Kicks, Wakeups uint64
}

// Stats returns the socket's counters.
func (s *Socket) Stats() (Stats, error) {
	if s.closed {
		return Stats{}, ErrClosed
	}
	st, err := statistics(s.fd)
	if err != nil {
		return Stats{}, fmt.Errorf("statistics: %w", err)
	}
	return Stats{XDPStatistics: st, Kicks: s.kicks, Wakeups: s.wakeups}, nil
}

// Close unmaps the rings, closes the socket and unmaps the UMEM if this
// socket owns it. The kernel drops the socket from any XSKMAP on close.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	// Drop the ring views before unmapping so a stray use faults loudly
	// in Go (nil) rather than in freed memory.
	s.Fill, s.Completion, s.RX, s.TX = FillRing{}, CompletionRing{}, RXRing{}, TXRing{}
	for _, m := range s.maps {
		if err := unix.Munmap(m); err != nil {
			errs = append(errs, fmt.Errorf("munmap ring: %w", err))
		}
	}
	s.maps = nil
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
		s.fd = -1
	}
	if s.ownUMEM && s.umem != nil {
		if err := unix.Munmap(s.umem); err != nil {
			errs = append(errs, fmt.Errorf("munmap umem: %w", err))
		}
	}
	s.umem = nil
	return errors.Join(errs...)
}

// mapUMEM maps n bytes of UMEM, on transparent huge pages where the
// kernel gives them to memory that asks (THP "madvise", the default, or
// "always"). Each received packet lands in a frame of its own, so on 4 KiB
// pages every packet's first read is a TLB miss and a page walk: on the
// 2026-12-03 KVM guest the first load of a received frame's EtherType
// took 90 % of the link's parse (docs/performance.md has what it was
// worth end to end). The advice has to come before the pages are
// populated, so MADV_POPULATE_WRITE follows it in place of MAP_POPULATE. Both are best effort: with huge pages off the UMEM is
// small pages, and a kernel before 5.14 faults it in when registration
// pins it.
func mapUMEM(n int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap umem: %w", err)
	}
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
	_ = unix.Madvise(m, unix.MADV_POPULATE_WRITE)
	return m, nil
}
