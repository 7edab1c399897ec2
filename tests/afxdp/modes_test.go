package afxdp_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bpf"
	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/xdp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// vethZeroCopy is what veth does with an XDP_ZEROCOPY bind on this kernel
// (Linux 6.x): it refuses it. veth has no XSK buffer pool support (its
// ndo_bpf handles XDP_SETUP_PROG only, there is no ndo_xsk_wakeup, and
// veth_set_xdp_features never sets NETDEV_XDP_ACT_XSK_ZEROCOPY), so
// xp_assign_dev fails a forced zero-copy bind with EOPNOTSUPP. A patch
// series adding veth zero-copy was posted in 2023 but is not in mainline;
// if a kernel ever takes it, this test fails and says so.
const vethZeroCopy = false

// TestBindZeroCopyOnVeth binds one socket with BindZeroCopy on a veth,
// without the link, and checks the outcome is the one veth supports.
func TestBindZeroCopyOnVeth(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(1500, 4))
	var s *xdp.Socket
	err := p.A.NS.Do(func() (err error) {
		s, err = xdp.Open(xdp.Config{Ifindex: p.A.Index, NumFrames: 64,
			FillSize: 32, CompletionSize: 32, RXSize: 32, TXSize: 32, Mode: xdp.BindZeroCopy})
		return err
	})
	if err == nil {
		defer s.Close()
		if !vethZeroCopy {
			t.Fatalf("BindZeroCopy on veth succeeded (ZeroCopy %v); this kernel's veth supports zero-copy, update vethZeroCopy", s.ZeroCopy())
		}
		if !s.ZeroCopy() {
			t.Fatal("BindZeroCopy bound but ZeroCopy() is false")
		}
		return
	}
	if vethZeroCopy {
		t.Fatalf("BindZeroCopy on veth: %v", err)
	}
	if !errors.Is(err, xdp.ErrZeroCopy) {
		t.Errorf("BindZeroCopy on veth: %v, not ErrZeroCopy", err)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("BindZeroCopy on veth: %v, want the kernel's EOPNOTSUPP inside", err)
	}
	t.Logf("BindZeroCopy on veth: %v", err)
}

// TestBindModesOnVeth opens the link on a veth in each bind mode: copy and
// auto bind (auto falling back to copy, since veth has no zero-copy) and
// exchange packets; zero-copy fails with ErrZeroCopy and leaves no XDP
// program behind.
func TestBindModesOnVeth(t *testing.T) {
	netns.RequireRoot(t)
	for _, tc := range []struct {
		mode     xdp.BindMode
		wantErr  bool
		wantZero bool
	}{
		{xdp.BindCopy, false, false},
		{xdp.BindAuto, false, vethZeroCopy},
		{xdp.BindZeroCopy, !vethZeroCopy, true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			p := netns.NewPair(t, pairConfig(1500, 4))
			if tc.wantErr {
				var l *afxdp.Link
				err := p.A.NS.Do(func() (err error) {
					l, err = afxdp.Open(afxdp.Config{Interface: p.A.Name, BindMode: tc.mode})
					return err
				})
				if err == nil {
					l.Close()
					t.Fatalf("open in %v mode on veth succeeded", tc.mode)
				}
				if !errors.Is(err, xdp.ErrZeroCopy) {
					t.Errorf("open in %v mode: %v, not ErrZeroCopy", tc.mode, err)
				}
				if xdpAttached(t, p.A) {
					t.Error("failed open left the XDP program attached")
				}
				return
			}
			a := open(t, p.A, afxdp.Config{BindMode: tc.mode})
			b := open(t, p.B, afxdp.Config{BindMode: xdp.BindCopy})
			if a.ZeroCopy() != tc.wantZero {
				t.Errorf("%v mode: ZeroCopy() %v, want %v", tc.mode, a.ZeroCopy(), tc.wantZero)
			}
			if b.ZeroCopy() {
				t.Error("copy mode: ZeroCopy() true")
			}
			exchange(t, a, b, p.AddrB, []int{0, 1000})
			exchange(t, b, a, p.AddrA, []int{0, 1000})
		})
	}
}

// Frame states in a shared UMEM's ledger. A frame is always in exactly one.
const (
	frameFree = iota // the test's, unused
	frameHeld        // the test's, holding a received frame
	frameFill        // on queue q's Fill ring (+q)
	frameTX   = frameFill + numQueues
)

const numQueues = 2

// ledger tracks where every frame of one UMEM is, shared by the sockets of
// all queues, and fails the test on any move the ring protocol forbids: a
// frame received on a queue whose Fill ring did not hold it, a completion
// for a frame not being sent on that queue, a frame in two places.
type ledger struct {
	t     *testing.T
	fs    uint64
	state []int
}

func newLedger(t *testing.T, s *xdp.Socket) *ledger {
	return &ledger{t: t, fs: uint64(s.FrameSize()), state: make([]int, s.NumFrames())}
}

func (l *ledger) move(addr uint64, from, to int, what string) {
	l.t.Helper()
	i := addr / l.fs
	if i >= uint64(len(l.state)) {
		l.t.Fatalf("%s: address %#x outside the %d-frame UMEM", what, addr, len(l.state))
	}
	if l.state[i] != from {
		l.t.Fatalf("%s: frame %d (address %#x) is in state %d, want %d", what, i, addr, l.state[i], from)
	}
	l.state[i] = to
}

func (l *ledger) take() uint64 {
	l.t.Helper()
	for i, s := range l.state {
		if s == frameFree {
			l.state[i] = frameHeld
			return uint64(i) * l.fs
		}
	}
	l.t.Fatal("no free frame in the UMEM")
	return 0
}

func (l *ledger) count(state int) int {
	n := 0
	for _, s := range l.state {
		if s == state {
			n++
		}
	}
	return n
}

// sharedSide is one end of a multi-queue veth: the XDP program and one
// socket per queue, queue 0's owning the UMEM and the others sharing it.
type sharedSide struct {
	v     netns.Veth
	mac   net.HardwareAddr
	prog  *bpf.Program
	socks [numQueues]*xdp.Socket
	led   *ledger
	addrs []uint64
	descs []xdp.Desc
	// posted is how many frames each queue's Fill ring holds.
	posted [numQueues]int
	recvd  [numQueues]int
}

const (
	sharedFrames = 256
	sharedRing   = 64
	fillDepth    = 16
)

// openShared attaches the program to v and opens the sockets, the sharers
// with Config.Shared pointing at queue 0's socket. t.Cleanup closes the
// sharers before the owner, which must outlive them (xdp.Config.Shared).
func openShared(t *testing.T, v netns.Veth) *sharedSide {
	t.Helper()
	s := &sharedSide{v: v, mac: v.MAC, addrs: make([]uint64, sharedRing), descs: make([]xdp.Desc, sharedRing)}
	err := v.NS.Do(func() (err error) {
		if s.prog, err = bpf.Attach(v.Index, bpf.ModeAuto, bpf.Options{Queues: numQueues}); err != nil {
			return err
		}
		for q := range numQueues {
			cfg := xdp.Config{Ifindex: v.Index, Queue: q, NumFrames: sharedFrames,
				FillSize: sharedRing, CompletionSize: sharedRing, RXSize: sharedRing, TXSize: sharedRing,
				Mode: xdp.BindCopy}
			if q > 0 {
				cfg.Shared = s.socks[0]
			}
			if s.socks[q], err = xdp.Open(cfg); err != nil {
				return fmt.Errorf("queue %d: %w", q, err)
			}
			if err = s.prog.Register(q, s.socks[q].FD()); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() {
		for q := numQueues - 1; q >= 0; q-- {
			if s.socks[q] != nil {
				if err := s.socks[q].Close(); err != nil {
					t.Errorf("close queue %d: %v", q, err)
				}
			}
		}
		if s.prog != nil {
			s.prog.Close()
		}
	})
	if err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	s.led = newLedger(t, s.socks[0])
	for q := range numQueues {
		s.refill(q)
	}
	return s
}

// refill tops queue q's Fill ring up to fillDepth frames.
func (s *sharedSide) refill(q int) {
	n := 0
	for s.posted[q]+n < fillDepth {
		s.addrs[n] = s.led.take()
		n++
	}
	got := s.socks[q].Fill.Produce(s.addrs[:n])
	for i, a := range s.addrs[:n] {
		to := frameFree
		if i < got {
			to = frameFill + q
		}
		s.led.move(a, frameHeld, to, "fill")
	}
	s.posted[q] += got
	s.socks[q].WakeRX()
}

// send transmits the frame at addr (a held frame) from queue q's socket
// and waits for its completion, as copy mode transmits within sendto.
func (s *sharedSide) send(t *testing.T, q int, addr uint64, n int) {
	t.Helper()
	sk := s.socks[q]
	s.led.move(addr, frameHeld, frameTX+q, "send")
	if sk.TX.Produce([]xdp.Desc{{Addr: addr, Len: uint32(n)}}) != 1 {
		t.Fatalf("queue %d: TX ring full", q)
	}
	deadline := time.Now().Add(giveUp)
	for s.led.count(frameTX+q) > 0 {
		if err := sk.Kick(); err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		m := sk.Completion.Consume(s.addrs)
		for _, a := range s.addrs[:m] {
			s.led.move(a, frameTX+q, frameFree, fmt.Sprintf("queue %d completion", q))
		}
		if m == 0 && time.Now().After(deadline) {
			t.Fatalf("queue %d: transmit never completed", q)
		}
	}
}

// recv waits for one frame on queue q's socket and returns its descriptor;
// the frame is held until released or sent.
func (s *sharedSide) recv(t *testing.T, q int) xdp.Desc {
	t.Helper()
	sk := s.socks[q]
	deadline := time.Now().Add(giveUp)
	for sk.RX.Ready() == 0 {
		if time.Now().After(deadline) {
			st, _ := sk.Stats()
			t.Fatalf("%s queue %d: nothing received; stats %+v", s.v.Name, q, st)
		}
		if _, err := sk.Poll(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if n := sk.RX.Consume(s.descs[:1]); n != 1 {
		t.Fatalf("queue %d: consumed %d", q, n)
	}
	d := s.descs[0]
	base := d.Addr &^ (s.led.fs - 1)
	s.led.move(base, frameFill+q, frameHeld, fmt.Sprintf("%s queue %d receive", s.v.Name, q))
	s.posted[q]--
	s.recvd[q]++
	s.refill(q)
	return d
}

// release gives a held frame back.
func (s *sharedSide) release(addr uint64) {
	s.led.move(addr&^(s.led.fs-1), frameHeld, frameFree, "release")
}

// UDP frame written with bth's views: Ethernet, IPv4 with DF, UDP to the
// RoCE port (so the program redirects it) and a payload naming the queue
// it was sent from and a sequence number.
const (
	ethHdr   = bth.EthernetLen
	ipHdr    = bth.IPv4MinLen
	magicOff = ethHdr + ipHdr + bth.UDPLen
	frameLen = magicOff + 64
)

var frameMagic = [4]byte{'U', 'M', 'E', 'M'}

func writeFrame(b []byte, dst, src net.HardwareAddr, q int, seq uint32) int {
	b = b[:frameLen]
	bth.Ethernet(b).Encode(&bth.EthernetFields{Dst: [6]byte(dst), Src: [6]byte(src), EtherType: bth.EtherTypeIPv4})
	// No UDP checksum (IPv4).
	bth.PutDatagramHeaders(b, magicOff, frameLen-magicOff, &bth.DatagramFields{
		Src: netip.AddrFrom4([4]byte{10, 97, 0, 1}), Dst: netip.AddrFrom4([4]byte{10, 97, 0, 2}),
		SrcPort: 0xc000, DstPort: bth.RoCEPort, TTL: 64, DF: true,
	})
	pl := b[magicOff:]
	copy(pl, frameMagic[:])
	pl[4] = byte(q)
	binary.BigEndian.PutUint32(pl[5:], seq)
	for i := 9; i < len(pl); i++ {
		pl[i] = byte(seq) + byte(i)
	}
	return frameLen
}

// readFrame checks a received frame and returns the queue and sequence
// number it carries.
func readFrame(b []byte) (q int, seq uint32, err error) {
	if len(b) != frameLen {
		return 0, 0, fmt.Errorf("frame of %d bytes, want %d", len(b), frameLen)
	}
	if bth.UDP(b[ethHdr+ipHdr:]).DstPort() != bth.RoCEPort {
		return 0, 0, errors.New("not to the RoCE port")
	}
	pl := b[magicOff:]
	if [4]byte(pl[:4]) != frameMagic {
		return 0, 0, errors.New("not a test frame")
	}
	q, seq = int(pl[4]), binary.BigEndian.Uint32(pl[5:])
	for i := 9; i < len(pl); i++ {
		if pl[i] != byte(seq)+byte(i) {
			return q, seq, fmt.Errorf("seq %d: payload damaged at %d", seq, i)
		}
	}
	return q, seq, nil
}

// multiQueuePair makes two namespaces joined by a veth whose ends have
// numQueues transmit and receive queues each (ip link add ... numtxqueues 2
// numrxqueues 2 type veth peer ... numtxqueues 2 numrxqueues 2).
func multiQueuePair(t *testing.T) (netns.Veth, netns.Veth) {
	t.Helper()
	na, nb := netns.New(t), netns.New(t)
	an, bn := netns.UniqueName(t, "urq"), netns.UniqueName(t, "urq")
	v := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: an, NumTxQueues: numQueues, NumRxQueues: numQueues},
		PeerName:  bn, PeerNamespace: netlink.NsFd(nb.Handle()),
		PeerNumTxQueues: numQueues, PeerNumRxQueues: numQueues,
	}
	if err := na.Netlink().LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s: %v", an, bn, err)
	}
	t.Cleanup(func() {
		if l, err := na.Netlink().LinkByName(an); err == nil {
			na.Netlink().LinkDel(l)
		}
	})
	var out [2]netns.Veth
	for i, e := range []struct {
		ns   *netns.NS
		name string
	}{{na, an}, {nb, bn}} {
		l, err := e.ns.Netlink().LinkByName(e.name)
		if err == nil {
			err = e.ns.Netlink().LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if a := l.Attrs(); a.NumTxQueues != numQueues || a.NumRxQueues != numQueues {
			t.Fatalf("%s has %d tx and %d rx queues, want %d", e.name, a.NumTxQueues, a.NumRxQueues, numQueues)
		}
		out[i] = netns.Veth{NS: e.ns, Name: e.name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
	}
	return out[0], out[1]
}

// TestSharedUMEM runs two sockets per veth end, one per queue, the second
// sharing the first's UMEM (XDP_SHARED_UMEM with its own Fill and
// Completion rings). A veth delivers a frame to the peer's receive queue
// with the index of the queue it was sent on (veth_xmit uses the skb's
// queue mapping, which a copy-mode AF_XDP transmit sets to the socket's
// queue), so a socket sending on queue q reaches the peer's socket on
// queue q. B echoes every frame from the other queue's socket, in place:
// a frame received into the UMEM through one socket's Fill ring is sent by
// the other socket, which is only valid because the UMEM is one. A ledger
// of every frame checks no frame is lost, duplicated or misrouted.
func TestSharedUMEM(t *testing.T) {
	netns.RequireRoot(t)
	va, vb := multiQueuePair(t)
	a, b := openShared(t, va), openShared(t, vb)
	for _, s := range []*sharedSide{a, b} {
		u0, u1 := s.socks[0].UMEM(), s.socks[1].UMEM()
		if &u0[0] != &u1[0] || len(u0) != len(u1) {
			t.Fatalf("%s: the sharer's UMEM is not the owner's", s.v.Name)
		}
		if s.socks[1].NumFrames() != sharedFrames || s.socks[1].FrameSize() != s.socks[0].FrameSize() {
			t.Errorf("sharer has %d frames of %d bytes", s.socks[1].NumFrames(), s.socks[1].FrameSize())
		}
		if s.socks[0].ZeroCopy() || s.socks[1].ZeroCopy() {
			t.Errorf("copy-mode sockets report zero-copy")
		}
	}

	// exchange sends one frame from A's queue q, checks it arrives on B's
	// queue q, echoes it from B's other queue and checks it arrives on
	// A's other queue.
	exchangeOn := func(q, echo int, seq uint32) {
		t.Helper()
		fa := a.led.take()
		n := writeFrame(a.socks[0].UMEM()[fa:], vb.MAC, va.MAC, q, seq)
		a.send(t, q, fa, n)

		d := b.recv(t, q)
		frame := b.socks[q].UMEM()[d.Addr : d.Addr+uint64(d.Len)]
		if gq, gs, err := readFrame(frame); err != nil || gq != q || gs != seq {
			t.Fatalf("B queue %d got queue %d seq %d (%v), want queue %d seq %d", q, gq, gs, err, q, seq)
		}
		// The echo goes back in the same frame, from another socket.
		copy(frame[0:6], va.MAC)
		copy(frame[6:12], vb.MAC)
		b.send(t, echo, d.Addr, int(d.Len))

		d = a.recv(t, echo)
		frame = a.socks[echo].UMEM()[d.Addr : d.Addr+uint64(d.Len)]
		if gq, gs, err := readFrame(frame); err != nil || gq != q || gs != seq {
			t.Fatalf("A queue %d got queue %d seq %d (%v), want queue %d seq %d", echo, gq, gs, err, q, seq)
		}
		a.release(d.Addr)
	}

	const rounds = 200 // more than the UMEM's frames, so every frame is reused
	for i := range rounds {
		q := i % numQueues
		exchangeOn(q, 1-q, uint32(i))
	}
	for _, s := range []*sharedSide{a, b} {
		for q := range numQueues {
			if s.recvd[q] != rounds/numQueues {
				t.Errorf("%s queue %d received %d frames, want %d", s.v.Name, q, s.recvd[q], rounds/numQueues)
			}
			if got := s.led.count(frameFill + q); got != fillDepth || s.posted[q] != fillDepth {
				t.Errorf("%s queue %d: %d frames on Fill (%d posted), want %d", s.v.Name, q, got, s.posted[q], fillDepth)
			}
			if got := s.led.count(frameTX + q); got != 0 {
				t.Errorf("%s queue %d: %d frames never completed", s.v.Name, q, got)
			}
			st, err := s.socks[q].Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Rx_dropped != 0 || st.Rx_invalid_descs != 0 || st.Tx_invalid_descs != 0 || st.Rx_ring_full != 0 {
				t.Errorf("%s queue %d: kernel counters %+v", s.v.Name, q, st.XDPStatistics)
			}
		}
		if free := s.led.count(frameFree); free != sharedFrames-numQueues*fillDepth {
			t.Errorf("%s: %d free frames, want %d", s.v.Name, free, sharedFrames-numQueues*fillDepth)
		}
		c, err := s.prog.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Redirected != rounds || c.NoSocket != 0 {
			t.Errorf("%s: program counters %+v, want %d redirected and none without a socket", s.v.Name, c, rounds)
		}
	}

	// Closing the sharers leaves the owners working on queue 0.
	for _, s := range []*sharedSide{a, b} {
		if err := s.socks[1].Close(); err != nil {
			t.Fatalf("%s: close sharer: %v", s.v.Name, err)
		}
	}
	for i := range 2 * fillDepth {
		exchangeOn(0, 0, uint32(rounds+i))
	}
}
