package afpacket

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/sock"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

var _ link.Link = (*Link)(nil)
var _ link.Waker = (*Link)(nil)
var _ link.Resolver = (*Link)(nil)

// Errors returned by Open.
var (
	// ErrAddr is returned when the address is missing or not on the
	// interface.
	ErrAddr = errors.New("afpacket: need an address of the interface")
	// ErrVLAN is returned for a VLAN ID outside 1-4094 or a priority
	// above 7.
	ErrVLAN = errors.New("afpacket: VLAN ID must be 1-4094 and priority 0-7")
)

// Config configures a link.
type Config struct {
	// Ifname is the interface; required.
	Ifname string
	// Addr is the link's address, one of the interface's; required.
	Addr netip.Addr
	// Batch is the most packets one system call moves; 0 means 64.
	Batch int
	// Buffers is the number of packet buffers; 0 means 1024.
	Buffers int
	// SockBuf is SO_RCVBUF and SO_SNDBUF in bytes; 0 means 4 MiB.
	SockBuf int
	// Resolver answers route and neighbour questions; nil means the link
	// opens its own in the caller's network namespace.
	Resolver *netinfo.Resolver
	// VLAN, when nonzero, is an 802.1Q VLAN ID (1-4094): Send tags every
	// frame with it and Priority, and Recv accepts only frames that came
	// with that tag (without it, only untagged or priority-tagged, VID 0,
	// frames). Addr may then be on a VLAN sub-interface of Ifname with
	// that ID (ip link add link IF name IF.ID type vlan id ID), which is
	// how the kernel resolves the VLAN's neighbours and answers ARP.
	VLAN uint16
	// Priority is the 802.1Q priority code point (0-7) of tagged frames;
	// RoCE deployments put the lossless class on 3.
	Priority uint8
	// NoPortReservation skips the UDP socket that keeps the kernel from
	// answering RoCE packets with ICMP port unreachable (for when a
	// firewall rule does that job).
	NoPortReservation bool
}

// Link is a RoCE link over an AF_PACKET socket.
type Link struct {
	c sock.Conn // pool, batches, counters, the owner's fence

	fd, resv int
	ifindex  int
	v6       bool
	info     link.Info
	res      *netinfo.Resolver
	ownRes   bool
	ipID     uint16
	ethLen   int    // Ethernet header on send: 14, or 18 with a VLAN tag
	vid      uint16 // the 802.1Q VLAN ID to tag frames with, or 0
	vlanDev  bool   // the interface is a VLAN sub-interface (isVLANDevice)
	pcp      uint8  // and the priority in the tag
	g        bth.Datagram
	hop      netinfo.Hop // the send path's last next hop
}

// Where a received frame starts in a buffer: its IPv4 header's end, with
// UDP, falls exactly at Headroom.
const rxStart = link.Headroom - bth.EthernetLen - bth.IPv4MinLen - bth.UDPLen

// Open opens a link on an interface. Call it in the network namespace of
// the interface; the socket stays there.
func Open(cfg Config) (*Link, error) {
	ifc, err := net.InterfaceByName(cfg.Ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	// A link-local address's zone is the interface itself; the GID has
	// none.
	a := cfg.Addr.Unmap().WithZone("")
	if cfg.VLAN > 4094 || cfg.Priority > 7 {
		return nil, fmt.Errorf("%w: VLAN %d priority %d", ErrVLAN, cfg.VLAN, cfg.Priority)
	}
	mtu := ifc.MTU
	if !onInterface(ifc, a) {
		sub := vlanOf(ifc.Index, cfg.VLAN)
		if sub == nil || !onInterface(sub, a) {
			return nil, fmt.Errorf("%w: %v on %s", ErrAddr, cfg.Addr, cfg.Ifname)
		}
		mtu = sub.MTU
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Buffers == 0 {
		cfg.Buffers = 1024
	}
	cfg.Buffers = max(cfg.Buffers, 2*cfg.Batch)
	if cfg.SockBuf == 0 {
		cfg.SockBuf = 4 << 20
	}
	l := &Link{fd: -1, resv: -1, ifindex: ifc.Index, v6: a.Is6(), res: cfg.Resolver, ethLen: bth.EthernetLen, vlanDev: isVLANDevice(ifc.Index)}
	if cfg.VLAN != 0 {
		l.ethLen += bth.VLANLen
		l.vid, l.pcp = cfg.VLAN, cfg.Priority
	}
	l.info = link.Info{Kind: "afpacket", Name: ifc.Name, Addr: a, MTU: mtu}
	if err := l.open(cfg); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// isVLANDevice reports whether interface index is an 802.1Q
// sub-interface. Frames reach its packet sockets with their tag still in
// the packet's metadata (Linux 6.1: vlan_do_receive steers them to the
// VLAN device and leaves vlan_tci set), so its filter must not ask for
// untagged frames; the kernel hands it its own VLAN's frames only.
func isVLANDevice(index int) bool {
	l, err := netlink.LinkByIndex(index)
	if err != nil {
		return false
	}
	_, ok := l.(*netlink.Vlan)
	return ok
}

// vlanOf returns the VLAN sub-interface of parent with ID vid, or nil.
func vlanOf(parent int, vid uint16) *net.Interface {
	if vid == 0 {
		return nil
	}
	ls, err := netlink.LinkList()
	if err != nil {
		return nil
	}
	for _, l := range ls {
		if v, ok := l.(*netlink.Vlan); ok && v.ParentIndex == parent && v.VlanId == int(vid) {
			ifc, err := net.InterfaceByIndex(v.Index)
			if err == nil {
				return ifc
			}
		}
	}
	return nil
}

func onInterface(ifc *net.Interface, a netip.Addr) bool {
	as, err := ifc.Addrs()
	if err != nil || !a.IsValid() {
		return false
	}
	for _, x := range as {
		if n, ok := x.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// filter is vlanFilter then ipFilter.
func filter(vid uint16) ([]bpf.RawInstruction, error) {
	ip := ipInstructions()
	return bpf.Assemble(append(vlanFilter(vid, len(ip)), ip...))
}

// vlanFilter passes, on to the next of rest instructions (whose last one
// rejects), frames that came with VLAN ID vid, or, for vid 0, untagged and
// priority-tagged ones. The kernel has taken the tag out of the frame and
// into the packet's metadata by the time a packet socket sees it, so the
// filter reads it with the VLAN ancillary loads.
func vlanFilter(vid uint16, rest int) []bpf.Instruction {
	if vid == 0 {
		// The tag reads as 0 when there is none.
		return []bpf.Instruction{
			bpf.LoadExtension{Num: bpf.ExtVLANTag},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xfff},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: uint8(rest - 1)},
		}
	}
	return []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtVLANTagPresent},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: uint8(rest - 1 + 3)},
		bpf.LoadExtension{Num: bpf.ExtVLANTag},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xfff},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(vid), SkipFalse: uint8(rest - 1)},
	}
}

// ipFilter passes IPv4 or IPv6 UDP to port 4791; IPv4 only unfragmented
// with no options longer than the header allows.
func ipFilter() ([]bpf.RawInstruction, error) { return bpf.Assemble(ipInstructions()) }

func ipInstructions() []bpf.Instruction {
	const (
		ethType = 12
		ip      = bth.EthernetLen
		accept  = 0x40000
	)
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: ethType, Size: 2},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.EtherTypeIPv4, SkipFalse: 7},
		// IPv4: protocol UDP, no fragment offset or MF, dst port 4791.
		/* 2 */ bpf.LoadAbsolute{Off: ip + 9, Size: 1},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.ProtocolUDP, SkipFalse: 11},
		/* 4 */ bpf.LoadAbsolute{Off: ip + 6, Size: 2},
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x3fff, SkipTrue: 9},
		/* 6 */ bpf.LoadMemShift{Off: ip},
		/* 7 */ bpf.LoadIndirect{Off: ip + 2, Size: 2},
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.RoCEPort, SkipTrue: 5, SkipFalse: 6},
		// IPv6: next header UDP (no extension headers), dst port 4791.
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.EtherTypeIPv6, SkipFalse: 5},
		/* 10 */ bpf.LoadAbsolute{Off: ip + 6, Size: 1},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.ProtocolUDP, SkipFalse: 3},
		/* 12 */ bpf.LoadAbsolute{Off: ip + bth.IPv6Len + 2, Size: 2},
		/* 13 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: bth.RoCEPort, SkipFalse: 1},
		/* 14 */ bpf.RetConstant{Val: accept},
		/* 15 */ bpf.RetConstant{Val: 0},
	}
}

func attach(fd int, prog []bpf.RawInstruction) error {
	f := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		f[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (l *Link) open(cfg Config) error {
	if l.res == nil {
		r, err := netinfo.New(netinfo.Options{})
		if err != nil {
			return fmt.Errorf("afpacket: %w", err)
		}
		l.res, l.ownRes = r, true
	}
	if !cfg.NoPortReservation {
		if err := l.reserve(); err != nil {
			return err
		}
	}
	// Protocol 0: the socket receives nothing until bound, by which time
	// the filter is in place.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("afpacket: socket: %w", err)
	}
	l.fd = fd
	prog, err := filter(cfg.VLAN)
	if cfg.VLAN == 0 && l.vlanDev {
		prog, err = ipFilter()
	}
	if err != nil {
		return fmt.Errorf("afpacket: filter: %w", err)
	}
	if err := attach(fd, prog); err != nil {
		return fmt.Errorf("afpacket: attach filter: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fmt.Errorf("afpacket: PACKET_IGNORE_OUTGOING: %w", err)
	}
	for _, o := range []int{unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE} {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, cfg.SockBuf)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.ifindex}); err != nil {
		return fmt.Errorf("afpacket: bind %s: %w", l.info.Name, err)
	}
	return l.c.Init(sock.Config{
		Name: "afpacket", FD: fd, V6: l.v6, Batch: cfg.Batch, Buffers: cfg.Buffers,
		BufSize: link.Headroom + l.info.MTU, RxAt: rxStart,
	})
}

// reserve binds the UDP socket that stops ICMP port unreachables; its
// filter drops every datagram before it is queued.
func (l *Link) reserve() error {
	a := l.info.Addr
	fam := unix.AF_INET
	var sa unix.Sockaddr
	if !l.v6 {
		sa = &unix.SockaddrInet4{Port: bth.RoCEPort, Addr: a.As4()}
	} else {
		fam = unix.AF_INET6
		s6 := &unix.SockaddrInet6{Port: bth.RoCEPort, Addr: a.As16()}
		if a.IsLinkLocalUnicast() {
			s6.ZoneId = uint32(l.ifindex) // bind(2) needs a link-local address's link
		}
		sa = s6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("afpacket: reservation socket: %w", err)
	}
	l.resv = fd
	drop, _ := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: 0}})
	if err := attach(fd, drop); err != nil {
		return fmt.Errorf("afpacket: reservation filter: %w", err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1)
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("afpacket: reserve port %d on %v: %w", bth.RoCEPort, a, err)
	}
	return nil
}

// Alloc implements link.Link.
func (l *Link) Alloc(pkts []*link.Packet) int { return l.c.Alloc(pkts) }

// Release implements link.Link.
func (l *Link) Release(pkts []*link.Packet) { l.c.Release(pkts) }

// Send implements link.Link.
//
// A packet to a destination whose next hop is not yet known is dropped
// (counted in TxDropped, with an error matching link.ErrResolving) while
// the resolver learns it in the background: Send never waits for ARP.
func (l *Link) Send(pkts []*link.Packet) (int, error) {
	return l.c.Send(pkts, l.stage)
}

// Resolve learns dst's next hop, waiting at most link.ResolveWait
// (link.Resolver).
func (l *Link) Resolve(dst netip.Addr) {
	// The resolver is safe from any goroutine, so this does not enter
	// the data path: the engine's owner may be inside Send or Wait right
	// now (Modify runs on the caller's goroutine). Close keeps res, only
	// closing it, so a late call gets ErrClosed from it.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if l.c.W.Closing() {
			return
		}
		_, err := l.res.Resolve(dst, time.Now())
		if !errors.Is(err, link.ErrResolving) || time.Since(start) >= link.ResolveWait {
			return
		}
	}
}

// stage writes Ethernet, IP and UDP in front of p, its ICRC, and points TX
// slot n at the frame.
func (l *Link) stage(n int, p *link.Packet) error {
	dst, err := l.c.Dst(p)
	if err != nil {
		return err
	}
	rt, err := l.res.Next(&l.hop, dst)
	if err != nil {
		return fmt.Errorf("afpacket: %w", err)
	}
	h := bth.DatagramFields{Src: l.info.Addr, Dst: dst, SrcPort: p.SrcPort, DstPort: bth.RoCEPort,
		TOS: p.TOS, TTL: 64, ID: l.ipID, DF: true}
	if h.SrcPort == 0 {
		h.SrcPort = 0xc000
	}
	hl := h.HeaderLen()
	if hl+p.Len > min(l.info.MTU, rt.MTU) || p.Off < hl+l.ethLen || p.Off+p.Len > len(p.Buf) {
		return l.c.ErrTooBig()
	}
	l.ipID++
	ip := bth.PutDatagramHeaders(p.Buf, p.Off, p.Len, &h)
	dg := p.Buf[ip : p.Off+p.Len]
	if err := bth.PutICRC(dg); err != nil {
		return fmt.Errorf("afpacket: %w", err)
	}
	et := uint16(bth.EtherTypeIPv4)
	if l.v6 {
		et = bth.EtherTypeIPv6
		bth.PutUDPChecksum(dg)
	}
	eth := ip - l.ethLen
	if l.vid != 0 {
		// Addresses, then the tag (TPID 0x8100, TCI), then the EtherType.
		bth.Ethernet(p.Buf[eth:]).Encode(&bth.EthernetFields{Dst: rt.DstMAC, Src: rt.SrcMAC, EtherType: bth.EtherTypeVLAN})
		bth.VLAN(p.Buf[eth+bth.EthernetLen:]).Encode(l.pcp, l.vid, et)
		et = bth.EtherTypeVLAN
	} else {
		bth.Ethernet(p.Buf[eth:]).Encode(&bth.EthernetFields{Dst: rt.DstMAC, Src: rt.SrcMAC, EtherType: et})
	}
	l.c.TX.SetBuf(n, p.Buf[eth:p.Off+p.Len])
	l.c.TX.SetLinklayer(n, l.ifindex, et, rt.DstMAC)
	return nil
}

// Recv implements link.Link.
func (l *Link) Recv(pkts []*link.Packet) (int, error) { return l.c.Recv(pkts, l.accept) }

func (l *Link) accept(i int, p *link.Packet) bool {
	n := l.c.RX.Len(i)
	if l.c.RX.Flags(i)&unix.MSG_TRUNC != 0 || l.c.RX.PacketType(i) != unix.PACKET_HOST || n < bth.EthernetLen {
		l.c.Stats.RxDropped++
		return false
	}
	ip := rxStart + bth.EthernetLen
	dg := p.Buf[ip : rxStart+n]
	et := bth.Ethernet(p.Buf[rxStart:]).EtherType()
	if err := bth.ParseDatagram(dg, &l.g); err != nil || l.g.Dst.Unmap() != l.info.Addr ||
		(et == bth.EtherTypeIPv4) == l.v6 || (!l.v6 && !bth.IPv4(dg).ChecksumValid()) {
		l.c.Stats.RxDropped++
		return false
	}
	dg = dg[:l.g.End]
	if bth.VerifyICRC(dg) != nil {
		l.c.Stats.RxICRCErrors++
		return false
	}
	*p = link.Packet{Buf: p.Buf, Off: ip + l.g.Off, Len: l.g.End - l.g.Off, Remote: l.g.Src.Unmap(),
		Local: l.g.Dst.Unmap(), SrcPort: l.g.SrcPort, TOS: l.g.TOS}
	l.c.Stats.RxPackets++
	l.c.Stats.RxBytes += uint64(p.Len)
	return true
}

// Wait implements link.Link.
func (l *Link) Wait(timeout time.Duration) error { return l.c.Wait(timeout) }

// Wake implements link.Waker.
func (l *Link) Wake() { l.c.Wake() }

// Info implements link.Link.
func (l *Link) Info() link.Info { return l.info }

// Stats implements link.Link.
func (l *Link) Stats() link.Stats { return l.c.Stats }

// Close implements link.Link. It may be called from any goroutine: it
// wakes a Wait and returns once the owner is out of its call and the
// sockets are closed.
func (l *Link) Close() error {
	l.c.Close(l.release)
	return nil
}

func (l *Link) release() {
	for _, fd := range []*int{&l.fd, &l.resv} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if l.ownRes && l.res != nil {
		l.res.Close() // kept, closed: Resolve may still read it
	}
	l.c.Free()
}
