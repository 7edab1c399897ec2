package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Errors returned by this package.
var (
	// ErrClosed is returned by methods of a closed Program.
	ErrClosed = errors.New("xdp program closed")
	// ErrQueue is returned for a queue index outside the socket map.
	ErrQueue = errors.New("queue index out of range")
	// ErrAttach is returned when the program attaches in no allowed mode.
	ErrAttach = errors.New("cannot attach xdp program")
)

// Mode says how the program is attached to an interface.
type Mode int

const (
	// ModeAuto tries native (driver) mode and falls back to generic mode.
	ModeAuto Mode = iota
	// ModeDriver runs the program in the driver's receive path (native XDP).
	ModeDriver
	// ModeGeneric runs the program on sk_buffs after the driver (skb mode),
	// for drivers without native XDP; AF_XDP then works in copy mode only.
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeDriver:
		return "driver"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// DefaultQueues is the XSKMAP size when Options.Queues is zero.
const DefaultQueues = 64

// Options configure Load.
type Options struct {
	// Queues is the number of receive queues the socket map can hold
	// (default DefaultQueues); it must exceed every queue index registered.
	Queues int
}

// Counters are the program's per-CPU counters summed over CPUs.
type Counters struct {
	// Redirected counts RoCE frames handed to an AF_XDP socket.
	Redirected uint64
	// NoSocket counts RoCE frames passed to the kernel because no socket
	// was registered for their queue.
	NoSocket uint64
	// Passed counts every other frame passed to the kernel.
	Passed uint64
}

// Program is the loaded XDP program and its maps, optionally attached to
// one interface. Close releases everything.
type Program struct {
	objs    uroceObjects
	queues  int
	lnk     link.Link
	mode    Mode
	ifindex int
	closed  bool
}

// Load loads the program and its maps into the kernel without attaching it.
func Load(opts Options) (*Program, error) {
	spec, err := loadUroce()
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	q := opts.Queues
	if q <= 0 {
		q = DefaultQueues
	}
	spec.Maps[uroceMapXsks].MaxEntries = uint32(q)
	p := &Program{queues: q}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load program: %w", err)
	}
	return p, nil
}

// Attach loads the program and attaches it to the interface with index
// ifindex in the current network namespace. mode ModeAuto tries driver mode
// first, then generic mode; Mode reports which one took.
func Attach(ifindex int, mode Mode, opts Options) (*Program, error) {
	p, err := Load(opts)
	if err != nil {
		return nil, err
	}
	if err := p.Attach(ifindex, mode); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Attach attaches a loaded program to the interface with index ifindex
// through a BPF link, which the kernel removes when the process exits.
// It returns ErrAttach, wrapping the kernel's reasons, if no allowed mode
// works.
func (p *Program) Attach(ifindex int, mode Mode) error {
	if p.closed {
		return ErrClosed
	}
	if p.lnk != nil {
		return fmt.Errorf("attach ifindex %d: %w: already attached to ifindex %d", ifindex, ErrAttach, p.ifindex)
	}
	try := []Mode{mode}
	if mode == ModeAuto {
		try = []Mode{ModeDriver, ModeGeneric}
	}
	var errs []error
	for _, m := range try {
		flags := link.XDPDriverMode
		if m == ModeGeneric {
			flags = link.XDPGenericMode
		}
		l, err := link.AttachXDP(link.XDPOptions{
			Program:   p.objs.UroceXdp,
			Interface: ifindex,
			Flags:     flags,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s mode: %w", m, err))
			continue
		}
		p.lnk, p.mode, p.ifindex = l, m, ifindex
		return nil
	}
	return fmt.Errorf("attach ifindex %d: %w: %w", ifindex, ErrAttach, errors.Join(errs...))
}

// Mode returns the mode the program is attached in (ModeAuto if it is not
// attached).
func (p *Program) Mode() Mode {
	if p.lnk == nil {
		return ModeAuto
	}
	return p.mode
}

// Ifindex returns the interface the program is attached to, or 0.
func (p *Program) Ifindex() int {
	if p.lnk == nil {
		return 0
	}
	return p.ifindex
}

// Register points queue's entry of the socket map at the AF_XDP socket fd,
// which must already be bound to that queue of the interface (the kernel
// refuses unbound sockets with EOPNOTSUPP). From then on RoCE frames
// arriving on the queue go to the socket.
func (p *Program) Register(queue, fd int) error {
	if p.closed {
		return ErrClosed
	}
	if queue < 0 || queue >= p.queues {
		return fmt.Errorf("register queue %d: %w (map holds %d)", queue, ErrQueue, p.queues)
	}
	if err := p.objs.Xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("register queue %d: %w", queue, err)
	}
	return nil
}

// Unregister removes queue's socket; its RoCE frames go to the kernel again.
func (p *Program) Unregister(queue int) error {
	if p.closed {
		return ErrClosed
	}
	if queue < 0 || queue >= p.queues {
		return fmt.Errorf("unregister queue %d: %w", queue, ErrQueue)
	}
	if err := p.objs.Xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregister queue %d: %w", queue, err)
	}
	return nil
}

// Counters sums the program's counters over CPUs.
func (p *Program) Counters() (Counters, error) {
	if p.closed {
		return Counters{}, ErrClosed
	}
	var c Counters
	dst := []*uint64{&c.Redirected, &c.NoSocket, &c.Passed}
	for i, d := range dst {
		var per []uint64
		if err := p.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return Counters{}, fmt.Errorf("counters: %w", err)
		}
		for _, v := range per {
			*d += v
		}
	}
	return c, nil
}

// Close detaches the program (if attached) and releases the program and
// its maps. Sockets registered in the map are not closed.
func (p *Program) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.lnk != nil {
		if err := p.lnk.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach: %w", err))
		}
		p.lnk = nil
	}
	if err := p.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close objects: %w", err))
	}
	return errors.Join(errs...)
}
