package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bpf"
	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/waiter"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/uroce/uroce/xdp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	_ link.Link  = (*Link)(nil)
	_ link.Waker = (*Link)(nil)
)

// Errors returned by this package (besides link.ErrClosed, link.ErrTooBig
// and link.ErrNoRoute, which Send wraps).
var (
	// ErrConfig is returned by Open for an unusable configuration.
	ErrConfig = errors.New("invalid afxdp config")
	// ErrBuffer is returned by Send for a packet whose buffer did not come
	// from this link's Alloc or Recv, or whose Off and Len do not fit it.
	ErrBuffer = errors.New("packet buffer not from this link")
	// ErrTxFull is returned by Send when the TX ring has no room left.
	ErrTxFull = errors.New("tx ring full")
)

// WaitMode selects how Wait waits for packets.
type WaitMode int

const (
	// WaitPoll sleeps in poll(2).
	WaitPoll WaitMode = iota
	// WaitBusyPoll spins until a packet arrives or the timeout passes,
	// driving NAPI through recvfrom when the kernel enabled SO_BUSY_POLL.
	WaitBusyPoll
	// WaitHybrid spins for Config.Spin, then sleeps in poll(2).
	WaitHybrid
)

var (
	_ link.Link     = (*Link)(nil)
	_ link.Waker    = (*Link)(nil)
	_ link.Resolver = (*Link)(nil)
)

// Config configures Open.
type Config struct {
	// Interface is the network interface, in the calling thread's
	// network namespace.
	Interface string
	// Addr is the local IP address to send from; zero means the
	// interface's first IPv4 address, or its first global IPv6 address.
	Addr netip.Addr
	// Queues lists the queues to open a socket on; nil means all of the
	// interface's receive queues.
	Queues []int
	// BindMode is copy, zero-copy or auto (zero-copy if the driver can).
	BindMode xdp.BindMode
	// AttachMode is the XDP attach mode (auto: driver, then generic).
	AttachMode bpf.Mode
	// Wait selects how Wait waits.
	Wait WaitMode
	// Spin bounds WaitHybrid's spinning; default 50µs.
	Spin time.Duration
	// BusyPoll is the SO_BUSY_POLL time; default 20µs with WaitBusyPoll
	// and WaitHybrid, off with WaitPoll. Negative turns it off. It is
	// always off where a zero-copy bind may be made on a driver that
	// transmits from a NAPI of its own (virtio_net; see quirks_linux.go).
	BusyPoll time.Duration
	// NeighborMAC, when set, is the next hop's MAC for every destination,
	// and no route lookup is made.
	NeighborMAC net.HardwareAddr
	// RingSize is the size of each ring (a power of two, default 2048); the
	// UMEM holds RingSize receive chunks and RingSize chunks of transmit
	// spans.
	RingSize int
	// SrcPort is the UDP source port for packets whose SrcPort is 0
	// (default 0xC000, the start of rxe's range).
	SrcPort uint16
	// HopLimit is the IPv4 TTL and IPv6 hop limit (default 64).
	HopLimit uint8
	// VLAN, when nonzero, is an 802.1Q VLAN ID (1-4094) that Send tags
	// every frame with, at priority Priority (0-7). Receive takes tagged
	// and untagged frames alike, as the XDP program steers both. Addr is
	// then one of the VLAN sub-interface's, through which the resolver
	// finds neighbours.
	VLAN     uint16
	Priority uint8
}

// Link is an AF_XDP RoCEv2 link on one interface.
type Link struct {
	cfg     Config
	info    link.Info
	ifindex int
	srcMAC  [6]byte
	dstMAC  [6]byte
	static  bool
	res     *netinfo.Resolver
	hop     netinfo.Hop // the send path's last next hop
	prog    *bpf.Program
	queues  []*queue
	txq     *queue
	rrNext  int
	stats   link.Stats
	w       *waiter.Waiter // fences Close against the owner; Wait's poll
	zc      bool
	mbuf    bool

	// hdr is the IP and UDP headers' template for the last source and
	// destination sent to (hdrSrc, hdrDst; valid once hdrSet): a QP's
	// packets go to its one peer, so most packets reuse it.
	hdr            bth.DatagramTemplate
	hdrSrc, hdrDst netip.Addr
	hdrSet         bool

	// woken is Wake's word for a spinning Wait, which does not read the
	// waiter's eventfd (a Wait asleep in poll is woken through it).
	woken atomic.Bool
}

// Open attaches the XDP program to cfg.Interface and opens one AF_XDP
// socket per queue. It must run in the interface's network namespace.
func Open(cfg Config) (_ *Link, err error) {
	if cfg.RingSize == 0 {
		cfg.RingSize = 2048
	}
	if cfg.RingSize < 64 || cfg.RingSize&(cfg.RingSize-1) != 0 {
		return nil, fmt.Errorf("ring size %d: %w", cfg.RingSize, ErrConfig)
	}
	if cfg.Spin == 0 {
		cfg.Spin = 50 * time.Microsecond
	}
	driver := driverName(cfg.Interface)
	if quirks[driver].txOwnNAPI && cfg.BindMode != xdp.BindCopy {
		cfg.BusyPoll = -1
	}
	if cfg.BusyPoll == 0 && cfg.Wait != WaitPoll {
		cfg.BusyPoll = 20 * time.Microsecond
	}
	if cfg.SrcPort == 0 {
		cfg.SrcPort = 0xc000
	}
	if cfg.HopLimit == 0 {
		cfg.HopLimit = 64
	}
	if cfg.VLAN > 4094 || cfg.Priority > 7 {
		return nil, fmt.Errorf("VLAN %d priority %d: %w", cfg.VLAN, cfg.Priority, ErrConfig)
	}
	nl, err := netlink.LinkByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", cfg.Interface, err)
	}
	attrs := nl.Attrs()
	l := &Link{cfg: cfg, ifindex: attrs.Index}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	copy(l.srcMAC[:], attrs.HardwareAddr)
	if len(cfg.NeighborMAC) > 0 {
		if len(cfg.NeighborMAC) != 6 {
			return nil, fmt.Errorf("neighbour MAC %v: %w", cfg.NeighborMAC, ErrConfig)
		}
		copy(l.dstMAC[:], cfg.NeighborMAC)
		l.static = true
	}
	if !cfg.Addr.IsValid() {
		if cfg.Addr, err = firstAddr(nl); err != nil {
			return nil, err
		}
	}
	l.cfg.Addr = cfg.Addr.Unmap().WithZone("") // a link-local one's zone is this interface
	l.info = link.Info{Kind: "afxdp", Name: cfg.Interface, Addr: l.cfg.Addr, MTU: attrs.MTU}
	if !l.static {
		if l.res, err = netinfo.New(netinfo.Options{}); err != nil {
			return nil, fmt.Errorf("resolver: %w", err)
		}
	}

	queues := cfg.Queues
	if queues == nil {
		if ch, err := channels(cfg.Interface); err == nil {
			if err := checkChannels(cfg.Interface, driver, ch); err != nil {
				return nil, err
			}
		}
		n := rxQueues(cfg.Interface)
		if n <= 0 {
			n = 1
		}
		for i := range n {
			queues = append(queues, i)
		}
	}
	maxq := 0
	for _, q := range queues {
		maxq = max(maxq, q+1)
	}
	if l.prog, err = bpf.Attach(l.ifindex, cfg.AttachMode, bpf.Options{Queues: maxq}); err != nil {
		return nil, err
	}

	// Frames up to one chunk less XDP_PACKET_HEADROOM arrive in one
	// buffer; larger ones need multi-buffer (XDP_USE_SG), without which
	// the kernel drops them silently.
	const fs = xdp.DefaultFrameSize
	maxFrame := bth.EthernetLen + bth.VLANLen + attrs.MTU
	l.mbuf = maxFrame > fs-unix.XDP_PACKET_HEADROOM
	// A span holds Headroom plus the largest RoCE packet (the IPv4 case).
	spanChunks := (link.Headroom + attrs.MTU - bth.IPv4MinLen - bth.UDPLen + fs - 1) / fs
	spans := cfg.RingSize / spanChunks
	for i, qid := range queues {
		sc := xdp.Config{
			Ifindex: l.ifindex, Queue: qid, FrameSize: fs,
			NumFrames: cfg.RingSize + spans*spanChunks,
			FillSize:  cfg.RingSize, CompletionSize: cfg.RingSize,
			RXSize: cfg.RingSize, TXSize: cfg.RingSize,
			Mode: cfg.BindMode, MultiBuffer: l.mbuf,
			TxBudget: cfg.RingSize / 4,
		}
		if cfg.BusyPoll > 0 {
			sc.BusyPoll = cfg.BusyPoll
		}
		s, err := xdp.Open(sc)
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", qid, err)
		}
		q := newQueue(qid, s, cfg.RingSize, spanChunks, spans)
		l.queues = append(l.queues, q)
		if i == 0 {
			l.zc = s.ZeroCopy()
		}
		if err := l.prog.Register(qid, s.FD()); err != nil {
			return nil, err
		}
	}
	l.txq = l.queues[0]
	fds := make([]int, len(l.queues))
	for i, q := range l.queues {
		fds[i] = q.sock.FD()
	}
	if l.w, err = waiter.New(fds...); err != nil {
		return nil, err
	}
	l.w.SetProbe(l.ready)
	return l, nil
}

func firstAddr(nl netlink.Link) (netip.Addr, error) {
	var v6 netip.Addr
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		as, err := netlink.AddrList(nl, fam)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("addresses of %s: %w", nl.Attrs().Name, err)
		}
		for _, a := range as {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() {
				return ip, nil
			}
			if !v6.IsValid() && ip.IsGlobalUnicast() {
				v6 = ip
			}
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no address: %w", nl.Attrs().Name, ErrConfig)
}

// ZeroCopy reports whether the sockets are bound in zero-copy mode.
func (l *Link) ZeroCopy() bool { return l.zc }

// MultiBuffer reports whether the sockets use XDP multi-buffer (the MTU
// exceeds one UMEM chunk).
func (l *Link) MultiBuffer() bool { return l.mbuf }

// AttachMode reports the mode the XDP program is attached in.
func (l *Link) AttachMode() bpf.Mode { return l.prog.Mode() }

// BusyPoll reports whether the kernel accepted busy polling on the sockets.
func (l *Link) BusyPoll() bool { return l.queues[0].sock.BusyPoll() }

// Program returns the attached XDP program (for its counters).
func (l *Link) Program() *bpf.Program { return l.prog }

// Info describes the link.
func (l *Link) Info() link.Info { return l.info }

// Stats returns the link's counters.
func (l *Link) Stats() link.Stats { return l.stats }

// SocketStats sums the kernel's counters (XDP_STATISTICS: RX drops, ring
// full, fill ring empty) and the system calls over the link's sockets: the
// drops a transport sees only as retransmissions. Call it from the
// goroutine that owns the link, or after the traffic stopped.
func (l *Link) SocketStats() (xdp.Stats, error) {
	var t xdp.Stats
	if !l.w.Enter() {
		return t, link.ErrClosed
	}
	defer l.w.Exit()
	for _, q := range l.queues {
		s, err := q.sock.Stats()
		if err != nil {
			return t, fmt.Errorf("afxdp: queue %d: %w", q.id, err)
		}
		t.Rx_dropped += s.Rx_dropped
		t.Rx_invalid_descs += s.Rx_invalid_descs
		t.Tx_invalid_descs += s.Tx_invalid_descs
		t.Rx_ring_full += s.Rx_ring_full
		t.Rx_fill_ring_empty_descs += s.Rx_fill_ring_empty_descs
		t.Tx_ring_empty_descs += s.Tx_ring_empty_descs
		t.Kicks += s.Kicks
		t.Wakeups += s.Wakeups
	}
	return t, nil
}

// Alloc hands out transmit buffers: spans of the transmit queue's UMEM
// with Off = link.Headroom.
func (l *Link) Alloc(pkts []*link.Packet) int {
	if !l.w.Enter() {
		return 0
	}
	defer l.w.Exit()
	q := l.txq
	for i := range pkts {
		s := q.popSpan()
		if s < 0 {
			return i
		}
		p := &q.spanPkts[s]
		*p = link.Packet{Buf: q.span(s), Off: link.Headroom}
		pkts[i] = p
	}
	return len(pkts)
}

// find returns the queue whose UMEM holds b and b's offset in it.
func (l *Link) find(b []byte) (*queue, int) {
	for _, q := range l.queues {
		if off := offsetIn(q.umem, b); off >= 0 {
			return q, off
		}
	}
	return nil, -1
}

// Release takes back received packets and allocated packets never sent.
func (l *Link) Release(pkts []*link.Packet) {
	if len(pkts) == 0 {
		return // a polling loop releases its empty batches
	}
	if !l.w.Enter() {
		return
	}
	defer l.w.Exit()
	for _, p := range pkts {
		if p == nil {
			continue
		}
		if q, off := l.find(p.Buf); q != nil {
			q.release(off)
		}
	}
	// The chunks go back on Fill in the next Recv or Wait, not here:
	// Release comes between a turn's ACK and the caller's next post, on
	// write_lat's path, and Fill holds every other chunk meanwhile.
}

// nextHop returns the destination MAC for dst.
func (l *Link) nextHop(dst netip.Addr) ([6]byte, error) {
	if l.static {
		return l.dstMAC, nil
	}
	r, err := l.res.Next(&l.hop, dst)
	if err != nil {
		return [6]byte{}, err
	}
	return r.DstMAC, nil
}

// Resolve learns dst's next hop, waiting at most link.ResolveWait
// (link.Resolver).
func (l *Link) Resolve(dst netip.Addr) {
	if l.static {
		return
	}
	// The resolver is safe from any goroutine, so this does not enter
	// the data path: the engine's owner may be inside Send or Wait right
	// now (Modify runs on the caller's goroutine). Close keeps res, only
	// closing it, so a late call gets ErrClosed from it.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if l.w.Closing() {
			return
		}
		_, err := l.res.Resolve(dst, time.Now())
		if !errors.Is(err, link.ErrResolving) || time.Since(start) >= link.ResolveWait {
			return
		}
	}
}

// Send writes each packet's lower headers and ICRC in place and queues it
// on TX. It takes ownership of every packet. Errors wrap link.ErrClosed,
// link.ErrTooBig, link.ErrNoRoute, ErrBuffer or ErrTxFull.
func (l *Link) Send(pkts []*link.Packet) (int, error) {
	if !l.w.Enter() {
		l.stats.TxDropped += uint64(len(pkts))
		return 0, link.ErrClosed
	}
	defer l.w.Exit()
	var (
		firstErr error
		sent     int
	)
	for _, q := range l.queues {
		// A lower bound from the cached ring view; queueTX reloads
		// the kernel's index only if a frame does not fit it.
		q.txFree = q.sock.TX.FreeAtLeast(len(pkts)) - len(q.tx)
	}
	for _, p := range pkts {
		q, off := l.find(p.Buf)
		if q == nil {
			l.stats.TxDropped++
			firstErr = cmp(firstErr, ErrBuffer)
			continue
		}
		err := l.build(p)
		if err == nil {
			h := l.hdrLen(is6(p.Remote))
			if !q.queueTX(off+p.Off-h, h+p.Len) {
				err = ErrTxFull
			}
		}
		if err != nil {
			l.stats.TxDropped++
			firstErr = cmp(firstErr, err)
			q.release(off)
			continue
		}
		sent++
		l.stats.TxPackets++
		l.stats.TxBytes += uint64(p.Len)
	}
	for _, q := range l.queues {
		if err := q.flushTX(); err != nil {
			firstErr = cmp(firstErr, err)
		}
	}
	if firstErr != nil {
		return sent, fmt.Errorf("afxdp send: %w", firstErr)
	}
	return sent, nil
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// hdrLen is the length of the headers Send writes in front of the BTH.
func (l *Link) hdrLen(v6 bool) int {
	if l.cfg.VLAN != 0 {
		return hdrLen(v6) + bth.VLANLen
	}
	return hdrLen(v6)
}

func is6(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }

// build writes Ethernet, IP and UDP headers in front of p's RoCE packet and
// puts the ICRC at its end.
func (l *Link) build(p *link.Packet) error {
	dst := p.Remote.Unmap()
	v6 := dst.Is6()
	h := l.hdrLen(v6)
	if !dst.IsValid() {
		return link.ErrNoRoute
	}
	if p.Off < h || p.Len < minRoCE || p.Off+p.Len > len(p.Buf) {
		return ErrBuffer
	}
	src := p.Local.Unmap()
	if !src.IsValid() {
		src = l.cfg.Addr
	}
	if src.Is6() != v6 {
		return fmt.Errorf("source %v for destination %v: %w", src, dst, link.ErrNoRoute)
	}
	t := l.template(src, dst)
	if t.HeaderLen()+p.Len > l.info.MTU {
		return link.ErrTooBig
	}
	mac, err := l.nextHop(dst)
	if err != nil {
		return err
	}
	sp := p.SrcPort
	if sp == 0 {
		sp = l.cfg.SrcPort
	}
	// ID 0 with DF, as Linux sends (the ICRC covers the ID).
	ip := p.Buf[t.Put(p.Buf, p.Off, p.Len, p.TOS, 0, sp) : p.Off+p.Len]
	f := p.Buf[p.Off-h:]
	et := uint16(bth.EtherTypeIPv4)
	if v6 {
		et = bth.EtherTypeIPv6
	}
	if l.cfg.VLAN != 0 {
		// Addresses, the tag (TPID 0x8100, TCI), then the EtherType.
		bth.Ethernet(f).Encode(&bth.EthernetFields{Dst: mac, Src: l.srcMAC, EtherType: bth.EtherTypeVLAN})
		bth.VLAN(f[bth.EthernetLen:]).Encode(l.cfg.Priority, l.cfg.VLAN, et)
	} else {
		bth.Ethernet(f).Encode(&bth.EthernetFields{Dst: mac, Src: l.srcMAC, EtherType: et})
	}
	if err := bth.PutICRC(ip); err != nil {
		return fmt.Errorf("icrc: %w", err)
	}
	// The ICRC masks the UDP checksum, so it can be filled in last. IPv4
	// leaves it zero (no checksum), as rxe does.
	if v6 {
		bth.PutUDPChecksum(ip)
	}
	return nil
}

// template returns the headers' template from src to dst: the last one,
// or a new one if either address changed.
func (l *Link) template(src, dst netip.Addr) *bth.DatagramTemplate {
	if !l.hdrSet || src != l.hdrSrc || dst != l.hdrDst {
		l.hdr = bth.NewDatagramTemplate(&bth.DatagramFields{Src: src, Dst: dst,
			DstPort: bth.RoCEPort, TTL: l.cfg.HopLimit, DF: true})
		l.hdrSrc, l.hdrDst, l.hdrSet = src, dst, true
	}
	return &l.hdr
}

// Recv returns received RoCE packets whose ICRC verified, without blocking.
func (l *Link) Recv(pkts []*link.Packet) (int, error) {
	if !l.w.Enter() {
		return 0, link.ErrClosed
	}
	defer l.w.Exit()
	n := 0
	nq := len(l.queues)
	for i := 0; i < nq && n < len(pkts); i++ {
		q := l.queues[(l.rrNext+i)%nq]
		n += l.recvQueue(q, pkts[n:])
	}
	l.rrNext++
	return n, nil
}

func (l *Link) recvQueue(q *queue, pkts []*link.Packet) int {
	n := 0
	for n < len(pkts) {
		if q.rxHead == q.rxN {
			q.rxHead, q.rxN = 0, q.sock.RX.Consume(q.rx[:])
			if q.rxN == 0 && n == 0 && l.cfg.Wait == WaitBusyPoll {
				// Busy polling: an empty ring is a recvfrom that runs
				// the device's NAPI on this CPU, as the spinning Wait
				// does, so a caller that spins on Recv alone still
				// pulls packets in itself instead of waiting for
				// softirq work elsewhere (the raw floor's receive loop).
				q.postFill()
				q.sock.WakeRX()
				q.rxN = q.sock.RX.Consume(q.rx[:])
			}
			if q.rxN == 0 {
				break
			}
		}
		d := q.rx[q.rxHead]
		if d.Options&xdp.OptContinued == 0 {
			q.rxHead++
			if p := l.rxSingle(q, d); p != nil {
				pkts[n] = p
				n++
			}
			continue
		}
		end := q.rxHead
		for end < q.rxN-1 && q.rx[end].Options&xdp.OptContinued != 0 {
			end++
		}
		chain := q.rx[q.rxHead : end+1]
		q.rxHead = end + 1
		if p := l.rxChain(q, chain); p != nil {
			pkts[n] = p
			n++
		}
	}
	q.postFill()
	if q.rxN == 0 && q.sock.Fill.NeedWakeup() {
		q.sock.WakeRX()
	}
	return n
}

// deliver checks the frame in b (which starts at UMEM offset base) and
// fills p. It reports false, counting why, if the packet is to be dropped.
func (l *Link) deliver(b []byte, p *link.Packet, buf []byte, base int) bool {
	var f rxFrame
	if !parse(b, &f) {
		l.stats.RxDropped++
		return false
	}
	if bth.VerifyICRC(b[f.ip:f.ip+f.g.End]) != nil {
		l.stats.RxICRCErrors++
		return false
	}
	*p = link.Packet{
		Buf: buf, Off: base + f.ip + f.g.Off, Len: f.g.End - f.g.Off,
		Remote: f.g.Src, Local: f.g.Dst, SrcPort: f.g.SrcPort, TOS: f.g.TOS,
	}
	l.stats.RxPackets++
	l.stats.RxBytes += uint64(p.Len)
	return true
}

func (l *Link) rxSingle(q *queue, d xdp.Desc) *link.Packet {
	a := int(d.Addr)
	c := a / q.fs
	if c >= q.rxChunks || a+int(d.Len) > (c+1)*q.fs {
		l.stats.RxDropped++
		return nil
	}
	p := &q.rxPkts[c]
	buf := q.umem[c*q.fs : (c+1)*q.fs : (c+1)*q.fs]
	if !l.deliver(q.umem[a:a+int(d.Len)], p, buf, a-c*q.fs) {
		q.recycleChunk(d.Addr)
		return nil
	}
	q.rxOut[c] = true
	return p
}

// rxChain copies a multi-buffer frame into a span, so the packet is one
// slice, and recycles its chunks.
func (l *Link) rxChain(q *queue, chain []xdp.Desc) *link.Packet {
	s := q.popSpan()
	n := 0
	ok := s >= 0
	if ok {
		dst := q.span(s)
		for _, d := range chain {
			if n+int(d.Len) > len(dst) || int(d.Addr)+int(d.Len) > len(q.umem) {
				ok = false
				break
			}
			n += copy(dst[n:], q.umem[d.Addr:d.Addr+uint64(d.Len)])
		}
	}
	for _, d := range chain {
		q.recycleChunk(d.Addr)
	}
	if !ok {
		l.stats.RxDropped++
		if s >= 0 {
			q.freeSpan(s)
		}
		return nil
	}
	p := &q.spanPkts[s]
	buf := q.span(s)
	if !l.deliver(buf[:n], p, buf, 0) {
		q.freeSpan(s)
		return nil
	}
	return p
}

// ready reports whether Recv has something to return.
func (l *Link) ready() bool {
	for _, q := range l.queues {
		if q.rxHead < q.rxN || q.sock.RX.Ready() > 0 {
			return true
		}
	}
	return false
}

// Wait blocks until a packet is waiting, the timeout passes (negative:
// never) or the link is closed (link.ErrClosed).
func (l *Link) Wait(timeout time.Duration) error {
	if !l.w.Enter() {
		return link.ErrClosed
	}
	defer l.w.Exit()
	// Released chunks go back on Fill before any sleep: with them held,
	// a small ring could leave the kernel none to receive into.
	for _, q := range l.queues {
		q.postFill()
	}
	if l.ready() || l.woken.Swap(false) {
		return nil
	}
	if timeout == 0 {
		return nil
	}
	start := time.Now()
	switch l.cfg.Wait {
	case WaitBusyPoll:
		return l.spin(start, timeout)
	case WaitHybrid:
		spin := l.cfg.Spin
		if timeout >= 0 && timeout < spin {
			spin = timeout
		}
		if err := l.spin(start, spin); err != nil || l.ready() {
			return err
		}
		if timeout >= 0 {
			timeout -= time.Since(start)
			if timeout <= 0 {
				return nil
			}
		}
	}
	return l.poll(timeout)
}

// spin checks the rings until one has a packet or d passes, making a
// recvfrom per round when busy polling so the device's NAPI runs here.
func (l *Link) spin(start time.Time, d time.Duration) error {
	for i := 0; ; i++ {
		if l.w.Closing() {
			return link.ErrClosed
		}
		if l.woken.Swap(false) {
			return nil
		}
		for _, q := range l.queues {
			q.sock.WakeRX()
		}
		if l.ready() {
			return nil
		}
		// Reading the clock every round would cost more than the check.
		// Yield as often: a goroutine that the owner readied before it
		// came to wait (a poster's verdict, a Wait's completion) sits on
		// this P and would otherwise run only when the runtime preempts
		// the spin, some 10 ms later.
		if i&15 == 15 {
			if d >= 0 && time.Since(start) >= d {
				return nil
			}
			runtime.Gosched()
		}
	}
}

func (l *Link) poll(timeout time.Duration) error {
	closed, err := l.w.Wait(timeout)
	// A Wake that ended this poll also set woken; it is spent now.
	l.woken.Store(false)
	if closed {
		return link.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("afxdp wait: %w", err)
	}
	return nil
}

// Wake implements link.Waker: the Wait in progress, or else the next one,
// returns nil at once. Any goroutine may call it. A spinning Wait sees a
// flag; one asleep in poll(2) is woken through the waiter's eventfd.
func (l *Link) Wake() {
	l.woken.Store(true)
	l.w.Wake()
}

// Close detaches the XDP program and releases the sockets, their UMEMs and
// the resolver. It may be called from another goroutine to end a Wait.
func (l *Link) Close() error {
	var err error
	l.w.Close(func() { err = l.close() })
	return err
}

func (l *Link) close() error {
	var errs []error
	if l.prog != nil {
		for _, q := range l.queues {
			l.prog.Unregister(q.id)
		}
		if err := l.prog.Close(); err != nil {
			errs = append(errs, err)
		}
		l.prog = nil
	}
	for _, q := range l.queues {
		if err := q.sock.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	l.queues, l.txq = nil, nil
	if l.res != nil {
		l.res.Close() // kept, closed: Resolve may still read it
	}
	if l.w != nil {
		l.w.Free()
	}
	return errors.Join(errs...)
}
