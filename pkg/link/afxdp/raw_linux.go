package afxdp

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bpf"
	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link/internal/waiter"
	"github.com/uroce/uroce/xdp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Raw is a bare AF_XDP endpoint for the link benchmark's baseline: the
// same XDP program and socket setup as a Link on queue 0, but frames are
// written once up front and sent, echoed and counted as descriptors only,
// with no headers, ICRC, buffer bookkeeping or Link API per packet. What
// a Link costs on top of AF_XDP is the difference between the two.
type Raw struct {
	sock     *xdp.Socket
	prog     *bpf.Program
	fs       int
	spanBase int
	spanSize int
	spans    int
	frameLen int
	busy     bool
	// w, when set (RawConfig.Poller), is what waits sleep in.
	w         *waiter.Waiter
	rx        [rxBatch]xdp.Desc
	tx        []xdp.Desc
	comp      [compBatch]uint64
	fill      []uint64
	nextSpan  int
	rxPackets uint64
	// gather holds a multi-buffer frame for Receive.
	gather []byte
}

// RawConfig configures OpenRaw.
type RawConfig struct {
	// Interface is the interface, in the calling thread's namespace.
	Interface string
	// BusyPoll enables SO_BUSY_POLL (20µs) and spinning waits; otherwise
	// waits sleep in poll(2), or with Poller in the Go runtime's poller.
	BusyPoll bool
	// Poller makes a sleeping wait park its goroutine in the runtime's
	// poller, as a Link with WaitPoll does, instead of blocking its
	// thread in poll(2): the floor of a Go service that sleeps between
	// messages.
	Poller bool
	// RingSize is each ring's size (default 2048).
	RingSize int
	// BindMode is copy, zero-copy or auto.
	BindMode xdp.BindMode
}

// ErrRawTimeout is returned by Raw.PingPong when a reply does not come.
var ErrRawTimeout = errors.New("raw ping: no reply")

// OpenRaw attaches the XDP program to the interface and opens one AF_XDP
// socket on queue 0, multi-buffer if the MTU needs it.
func OpenRaw(cfg RawConfig) (_ *Raw, err error) {
	if cfg.RingSize == 0 {
		cfg.RingSize = 2048
	}
	nl, err := netlink.LinkByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", cfg.Interface, err)
	}
	mtu := nl.Attrs().MTU
	const fs = xdp.DefaultFrameSize
	spanChunks := (bth.EthernetLen + bth.VLANLen + mtu + fs - 1) / fs
	spans := cfg.RingSize / spanChunks
	r := &Raw{fs: fs, spanBase: cfg.RingSize * fs, spanSize: spanChunks * fs, spans: spans, busy: cfg.BusyPoll}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.prog, err = bpf.Attach(nl.Attrs().Index, bpf.ModeAuto, bpf.Options{Queues: 1}); err != nil {
		return nil, err
	}
	sc := xdp.Config{
		Ifindex: nl.Attrs().Index, Queue: 0, FrameSize: fs,
		NumFrames: cfg.RingSize + spans*spanChunks,
		FillSize:  cfg.RingSize, CompletionSize: cfg.RingSize, RXSize: cfg.RingSize, TXSize: cfg.RingSize,
		Mode: cfg.BindMode, MultiBuffer: bth.EthernetLen+bth.VLANLen+mtu > fs-unix.XDP_PACKET_HEADROOM,
		TxBudget: cfg.RingSize / 4,
	}
	if cfg.BusyPoll {
		sc.BusyPoll = 20 * time.Microsecond
	}
	if r.sock, err = xdp.Open(sc); err != nil {
		return nil, err
	}
	if err = r.prog.Register(0, r.sock.FD()); err != nil {
		return nil, err
	}
	if cfg.Poller && !cfg.BusyPoll {
		if r.w, err = waiter.New(r.sock.FD()); err != nil {
			return nil, err
		}
		r.w.SetProbe(func() bool { return r.sock.RX.Ready() > 0 })
	}
	r.tx = make([]xdp.Desc, 0, cfg.RingSize)
	r.fill = make([]uint64, 0, cfg.RingSize)
	for c := range cfg.RingSize {
		r.fill = append(r.fill, uint64(c*fs))
	}
	r.postFill()
	return r, nil
}

// SetFrame writes frame (a whole Ethernet frame) into every transmit span.
func (r *Raw) SetFrame(frame []byte) error {
	if len(frame) > r.spanSize {
		return fmt.Errorf("raw frame of %d bytes: %w", len(frame), ErrConfig)
	}
	u := r.sock.UMEM()
	for s := range r.spans {
		copy(u[r.spanBase+s*r.spanSize:], frame)
	}
	r.frameLen = len(frame)
	return nil
}

// ZeroCopy reports whether the socket is bound in zero-copy mode.
func (r *Raw) ZeroCopy() bool { return r.sock.ZeroCopy() }

// BusyPoll reports whether busy polling is on.
func (r *Raw) BusyPoll() bool { return r.sock.BusyPoll() }

func (r *Raw) postFill() {
	n := r.sock.Fill.Produce(r.fill)
	r.fill = r.fill[:copy(r.fill, r.fill[n:])]
	if r.sock.Fill.NeedWakeup() {
		r.sock.WakeRX()
	}
}

// reap recycles completed descriptors: echoed receive chunks go back to
// Fill; spans need nothing (they always hold the frame).
func (r *Raw) reap() {
	for {
		n := r.sock.Completion.Consume(r.comp[:])
		for _, a := range r.comp[:n] {
			if int(a) < r.spanBase {
				r.fill = append(r.fill, a&^uint64(r.fs-1))
			}
		}
		if n < len(r.comp) {
			break
		}
	}
	r.postFill()
}

// queueFrame queues the prepared frame from the next span; false if TX is
// full.
func (r *Raw) queueFrame() bool {
	if !r.queueSpan(r.nextSpan, r.frameLen) {
		return false
	}
	r.nextSpan = (r.nextSpan + 1) % r.spans
	return true
}

// queueSpan queues n bytes of span i as one frame, in as many descriptors
// as chunks it covers; false if TX is full.
func (r *Raw) queueSpan(i, n int) bool {
	nd := (n + r.fs - 1) / r.fs
	if r.sock.TX.Free()-len(r.tx) < nd {
		return false
	}
	a := r.spanBase + i*r.spanSize
	for left := n; left > 0; {
		l := min(left, r.fs)
		d := xdp.Desc{Addr: uint64(a), Len: uint32(l)}
		if l < left {
			d.Options = xdp.OptContinued
		}
		r.tx = append(r.tx, d)
		a, left = a+l, left-l
	}
	return true
}

func (r *Raw) flush() error {
	if len(r.tx) > 0 {
		n := r.sock.TX.Produce(r.tx)
		r.tx = r.tx[:copy(r.tx, r.tx[n:])]
	}
	if r.sock.TX.Pending() > 0 {
		if err := r.sock.Kick(); err != nil {
			return err
		}
	}
	r.reap()
	return nil
}

// wait waits for received descriptors: spinning (with busy-poll recvfrom)
// or in poll(2). It returns false when stop is set or deadline passes.
func (r *Raw) wait(stop *atomic.Bool, deadline time.Time) bool {
	for i := 0; r.sock.RX.Ready() == 0; i++ {
		if stop != nil && stop.Load() {
			return false
		}
		if i&63 == 63 && !deadline.IsZero() && time.Now().After(deadline) {
			return false
		}
		if r.busy {
			r.sock.WakeRX()
			continue
		}
		if r.w != nil {
			if !r.w.Enter() {
				return false
			}
			r.w.Wait(10 * time.Millisecond)
			r.w.Exit()
			continue
		}
		r.sock.Poll(10 * time.Millisecond)
	}
	return true
}

// PingPong sends the prepared frame len(rtt) times, each after the reply
// to the previous one arrived, and records each round trip.
func (r *Raw) PingPong(rtt []time.Duration) error {
	for i := range rtt {
		t0 := time.Now()
		if !r.queueFrame() {
			r.reap()
			if !r.queueFrame() {
				return ErrTxFull
			}
		}
		if err := r.flush(); err != nil {
			return err
		}
		if !r.wait(nil, t0.Add(5*time.Second)) {
			return ErrRawTimeout
		}
		r.consume(false)
		rtt[i] = time.Since(t0)
	}
	return nil
}

// consume takes every received descriptor; with echo it queues each one
// back out unchanged (the peer's program steers it by UDP port alone).
func (r *Raw) consume(echo bool) int {
	n := r.sock.RX.Consume(r.rx[:])
	for _, d := range r.rx[:n] {
		if d.Options&xdp.OptContinued == 0 {
			r.rxPackets++
		}
		if echo && r.sock.TX.Free()-len(r.tx) > 0 {
			r.tx = append(r.tx, d)
		} else {
			r.fill = append(r.fill, d.Addr&^uint64(r.fs-1))
		}
	}
	return n
}

// Echo reflects every received frame until stop is set and returns how
// many frames it saw.
func (r *Raw) Echo(stop *atomic.Bool) (uint64, error) {
	for r.wait(stop, time.Time{}) {
		r.consume(true)
		if err := r.flush(); err != nil {
			return r.rxPackets, err
		}
	}
	return r.rxPackets, nil
}

// Blast transmits the prepared frame as fast as the ring allows until stop
// is set and returns how many frames were queued.
func (r *Raw) Blast(stop *atomic.Bool) (uint64, error) {
	var sent uint64
	for !stop.Load() {
		for r.queueFrame() {
			sent++
			if len(r.tx) >= 64 {
				break
			}
		}
		if err := r.flush(); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Sink receives and recycles frames until stop is set and returns how many
// frames arrived.
func (r *Raw) Sink(stop *atomic.Bool) uint64 {
	for r.wait(stop, time.Time{}) {
		r.consume(false)
		r.postFill()
	}
	return r.rxPackets
}

// Received returns how many frames this endpoint has received.
func (r *Raw) Received() uint64 { return r.rxPackets }

// Close releases the socket and detaches the program.
func (r *Raw) Close() error {
	var errs []error
	if r.prog != nil {
		errs = append(errs, r.prog.Close())
		r.prog = nil
	}
	if r.w != nil {
		r.w.Close(r.w.Free)
		r.w = nil
	}
	if r.sock != nil {
		errs = append(errs, r.sock.Close())
		r.sock = nil
	}
	return errors.Join(errs...)
}
