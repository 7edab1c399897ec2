package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/internal/mmsg"
	"github.com/uroce/uroce/pkg/link/internal/sock"
	"golang.org/x/sys/unix"
)

var _ link.Link = (*Link)(nil)
var _ link.Waker = (*Link)(nil)

// Errors returned by Open.
var (
	// ErrAddr is returned when the address is not a specific unicast one.
	ErrAddr = errors.New("udp: need a specific local address")
)

// Config configures a link.
type Config struct {
	// Addr is the local address to bind; required.
	Addr netip.Addr
	// Port is the port bound and sent to; 0 means 4791.
	Port uint16
	// MTU is the IP MTU; 0 means the MTU of the interface holding Addr,
	// capped at 9000 (no RoCE packet is larger).
	MTU int
	// Batch is the most packets one system call moves; 0 means 64.
	Batch int
	// Buffers is the number of packet buffers; 0 means 1024.
	Buffers int
	// SockBuf is SO_RCVBUF and SO_SNDBUF in bytes; 0 means 4 MiB.
	SockBuf int
}

// Stats are the link's counters plus the ones particular to this backend.
type Stats struct {
	link.Stats
	// RxIDSolved counts IPv4 packets that verified only with a nonzero,
	// solved-for IP ID (16-bit strength; see the package documentation).
	RxIDSolved uint64
}

// Link is a RoCE link over a kernel UDP socket.
type Link struct {
	c sock.Conn // pool, batches, counters, the owner's fence

	fd      int
	v6      bool
	port    uint16
	scope   uint32 // interface index of a link-local address; 0 otherwise
	info    link.Info
	bufSize int

	ids        *idSolver
	rxIDSolved uint64
	rxTOS      uint8 // parseCmsg's finding for the datagram at hand

	// The send path's TOS: sockTOS is the socket's (IP_TOS or
	// IPV6_TCLASS), which a datagram without a control message gets;
	// runTOS and run count the latest packets' common TOS.
	sockTOS, runTOS uint8
	run             int
}

// Open binds a link. A link-local IPv6 address (fe80::/10) is bound on the
// interface its zone names ("fe80::1%eth0"), or without a zone on the one
// interface that holds it; the GID carries no zone, and packets to a
// link-local peer leave on that interface. rxe's GID 0 is such an address.
func Open(cfg Config) (*Link, error) {
	a := cfg.Addr.Unmap()
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
		return nil, ErrAddr
	}
	scope, err := linkScope(a)
	if err != nil {
		return nil, err
	}
	a = a.WithZone("")
	if cfg.Port == 0 {
		cfg.Port = bth.RoCEPort
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Buffers == 0 {
		cfg.Buffers = 1024
	}
	if cfg.Buffers < 2*cfg.Batch {
		cfg.Buffers = 2 * cfg.Batch
	}
	if cfg.SockBuf == 0 {
		cfg.SockBuf = 4 << 20
	}
	if cfg.MTU == 0 {
		cfg.MTU = min(ifaceMTU(a), 9000)
	}
	l := &Link{fd: -1, v6: a.Is6(), port: cfg.Port, scope: scope}
	l.info = link.Info{Kind: "udp", Name: a.String(), Addr: a, MTU: cfg.MTU}
	if err := l.open(a, cfg); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

func (l *Link) open(a netip.Addr, cfg Config) error {
	fam := unix.AF_INET
	if l.v6 {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("udp: socket: %w", err)
	}
	l.fd = fd
	type opt struct {
		level, name, v int
		what           string
	}
	opts := []opt{
		{unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.SockBuf, "SO_RCVBUF"},
		{unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SockBuf, "SO_SNDBUF"},
	}
	if l.v6 {
		opts = append(opts,
			opt{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1, "IPV6_V6ONLY"},
			opt{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"},
			opt{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
			// rxe peers may send UDP/IPv6 with a zero checksum; the
			// ICRC protects the packet.
			opt{unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX"},
		)
	} else {
		opts = append(opts,
			opt{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
			opt{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
		)
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.v); err != nil {
			return fmt.Errorf("udp: %s: %w", o.what, err)
		}
	}
	// As root, lift the buffers past net.core.rmem_max; harmless otherwise.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.SockBuf)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, cfg.SockBuf)
	var sa unix.Sockaddr
	if l.v6 {
		sa = &unix.SockaddrInet6{Port: int(cfg.Port), Addr: a.As16(), ZoneId: l.scope}
	} else {
		sa = &unix.SockaddrInet4{Port: int(cfg.Port), Addr: a.As4()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if errors.Is(err, unix.EADDRINUSE) && cfg.Port == bth.RoCEPort {
			// Kernel Soft-RoCE binds 4791 on the wildcard address
			// while its module is loaded (rdma_rxe in 6.12 whether or
			// not a device exists), so it takes every address.
			return fmt.Errorf("udp: bind %v: %w: another program holds UDP port %d there, or a kernel RoCE device does on every address (rdma_rxe holds it while its module is loaded: rmmod rdma_rxe)",
				netip.AddrPortFrom(a, cfg.Port), err, cfg.Port)
		}
		return fmt.Errorf("udp: bind %v: %w", netip.AddrPortFrom(a, cfg.Port), err)
	}
	l.ids = newIDSolver(cfg.MTU)
	// Buffers: headroom plus the largest UDP payload the MTU allows.
	l.bufSize = link.Headroom + cfg.MTU
	return l.c.Init(sock.Config{
		Name: "udp", FD: fd, V6: l.v6, Batch: cfg.Batch, Buffers: cfg.Buffers, BufSize: l.bufSize,
		TxCtrl: unix.CmsgSpace(4),
		RxCtrl: unix.CmsgSpace(4) + 16,
		RxAt:   link.Headroom,
	})
}

// linkScope returns the interface index a link-local IPv6 address is
// bound on: its zone's (a name or an index), or that of the one interface
// holding the address. Other addresses need none (0).
func linkScope(a netip.Addr) (uint32, error) {
	if !a.Is6() || !a.IsLinkLocalUnicast() {
		if a.Zone() != "" {
			return 0, fmt.Errorf("udp: %v: %w: a zone is for link-local addresses only", a, ErrAddr)
		}
		return 0, nil
	}
	if z := a.Zone(); z != "" {
		ifc, err := net.InterfaceByName(z)
		if err != nil {
			if i, perr := strconv.ParseUint(z, 10, 32); perr == nil && i > 0 {
				ifc, err = net.InterfaceByIndex(int(i))
			}
		}
		if err != nil {
			return 0, fmt.Errorf("udp: zone of %v: %w", a, err)
		}
		return uint32(ifc.Index), nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("udp: interfaces: %w", err)
	}
	var found []net.Interface
	for _, ifc := range ifs {
		as, _ := ifc.Addrs()
		for _, x := range as {
			if n, ok := x.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip == a {
					found = append(found, ifc)
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("udp: link-local %v: %w: no interface holds it (give its zone: %v%%eth0)", a, ErrAddr, a)
	case 1:
		return uint32(found[0].Index), nil
	}
	return 0, fmt.Errorf("udp: link-local %v: %w: held by %s and %s; give its zone", a, ErrAddr, found[0].Name, found[1].Name)
}

// ifaceMTU returns the MTU of the interface that holds a, or whose prefix
// holds it (127.0.0.2 is on lo by way of 127.0.0.0/8), or 1500.
func ifaceMTU(a netip.Addr) int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 1500
	}
	mtu := 1500
	for _, ifc := range ifs {
		as, _ := ifc.Addrs()
		for _, x := range as {
			n, ok := x.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if ok && ip.Unmap() == a {
				return ifc.MTU
			}
			if n.Contains(a.AsSlice()) && ifc.Flags&net.FlagLoopback != 0 {
				mtu = ifc.MTU
			}
		}
	}
	return mtu
}

// Alloc implements link.Link.
func (l *Link) Alloc(pkts []*link.Packet) int { return l.c.Alloc(pkts) }

// Release implements link.Link.
func (l *Link) Release(pkts []*link.Packet) { l.c.Release(pkts) }

// Send implements link.Link.
func (l *Link) Send(pkts []*link.Packet) (int, error) { return l.c.Send(pkts, l.stage) }

// stage writes the headers the kernel will write in front of p, for the
// ICRC only, and points TX slot n at the RoCE packet.
func (l *Link) stage(n int, p *link.Packet) error {
	dst, err := l.c.Dst(p)
	if err != nil {
		return err
	}
	h := bth.DatagramFields{Src: l.info.Addr, Dst: dst, SrcPort: l.port, DstPort: l.port, DF: true, TTL: 64}
	hl := h.HeaderLen()
	if hl+p.Len > l.info.MTU || p.Off < hl || p.Off+p.Len > len(p.Buf) {
		return l.c.ErrTooBig()
	}
	ip := bth.PutDatagramHeaders(p.Buf, p.Off, p.Len, &h)
	if err := bth.PutICRC(p.Buf[ip : p.Off+p.Len]); err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	tx := l.c.TX
	tx.SetBuf(n, p.Buf[p.Off:p.Off+p.Len])
	tx.SetInet(n, netip.AddrPortFrom(dst, l.port))
	if l.scope != 0 && dst.IsLinkLocalUnicast() {
		// A link-local destination means nothing without its link
		// (RFC 4007): the bound one, whatever zone the GID lost.
		tx.SetScope(n, l.scope)
	}
	tx.ResetControl(n)
	if p.TOS != l.runTOS {
		l.runTOS, l.run = p.TOS, 0
	}
	l.run++
	if p.TOS != l.sockTOS && !l.adoptTOS(n, p.TOS) {
		if l.v6 {
			tx.AddControlInt(n, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32(p.TOS))
		} else {
			tx.AddControlInt(n, unix.IPPROTO_IP, unix.IP_TOS, int32(p.TOS))
		}
	}
	return nil
}

// tosRun is how many packets in a row must share a TOS before it becomes
// the socket's.
const tosRun = 8

// adoptTOS makes tos, the TOS of the latest run of packets, the socket's
// once the run is long and slot n is the first of a batch (nothing staged
// yet relies on the socket's TOS), and reports whether it did. A control
// message costs the kernel a parse a datagram (about 55 ns a send here);
// a QP's packets share one TOS (DSCP and ECT), so the socket's default
// serves them, a packet with another TOS still gets its own in a control
// message, and traffic that alternates never makes the socket flap.
func (l *Link) adoptTOS(n int, tos uint8) bool {
	if l.run < tosRun || n != 0 {
		return false
	}
	var err error
	if l.v6 {
		err = unix.SetsockoptInt(l.fd, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(tos))
	} else {
		err = unix.SetsockoptInt(l.fd, unix.IPPROTO_IP, unix.IP_TOS, int(tos))
	}
	if err != nil {
		l.run = 0 // not another system call a packet: wait for a new run
		return false
	}
	l.sockTOS = tos
	return true
}

// Recv implements link.Link.
func (l *Link) Recv(pkts []*link.Packet) (int, error) { return l.c.Recv(pkts, l.accept) }

// accept checks slot i's datagram and fills p; a rejected datagram's
// buffer stays posted.
func (l *Link) accept(i int, p *link.Packet) bool {
	n := l.c.RX.Len(i)
	if l.c.RX.Flags(i)&unix.MSG_TRUNC != 0 || n < bth.BTHLen+bth.ICRCLen {
		l.c.Stats.RxDropped++
		return false
	}
	from := l.c.RX.Inet(i)
	l.rxTOS = 0
	mmsg.Cmsg(l.c.RX.Control(i), l.parseCmsg)
	// The socket is bound to one unicast address, so that address is the
	// header's destination: no IP_PKTINFO to ask the kernel for.
	*p = link.Packet{Buf: p.Buf, Off: link.Headroom, Len: n, Remote: from.Addr(), Local: l.info.Addr,
		SrcPort: from.Port(), TOS: l.rxTOS}
	h := bth.DatagramFields{Src: p.Remote, Dst: p.Local, SrcPort: from.Port(), DstPort: l.port, DF: true}
	ip := bth.PutDatagramHeaders(p.Buf, p.Off, n, &h)
	dg := p.Buf[ip : p.Off+n]
	crc, err := bth.ICRC(dg)
	if err != nil {
		l.c.Stats.RxDropped++
		return false
	}
	got := binary.LittleEndian.Uint32(dg[len(dg)-bth.ICRCLen:])
	if got != crc {
		// Only IPv4 has an ID to solve for; m counts the covered bytes
		// after it (IP header offset 6 to the ICRC).
		if l.v6 {
			l.c.Stats.RxICRCErrors++
			return false
		}
		id, ok := l.ids.solve(len(dg)-bth.ICRCLen-6, got^crc)
		if !ok {
			l.c.Stats.RxICRCErrors++
			return false
		}
		// Leave the header as it was on the wire.
		bth.IPv4(dg).SetID(id)
		l.rxIDSolved++
	}
	l.c.Stats.RxPackets++
	l.c.Stats.RxBytes += uint64(n)
	return true
}

func (l *Link) parseCmsg(level, typ int32, data []byte) {
	switch {
	case level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
		l.rxTOS = data[0]
	case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && len(data) >= 4:
		l.rxTOS = uint8(binary.NativeEndian.Uint32(data))
	}
}

// Wait implements link.Link.
func (l *Link) Wait(timeout time.Duration) error { return l.c.Wait(timeout) }

// Wake implements link.Waker.
func (l *Link) Wake() { l.c.Wake() }

// Info implements link.Link.
func (l *Link) Info() link.Info { return l.info }

// Stats implements link.Link.
func (l *Link) Stats() link.Stats { return l.c.Stats }

// ExtStats returns the counters with this backend's own.
func (l *Link) ExtStats() Stats { return Stats{Stats: l.c.Stats, RxIDSolved: l.rxIDSolved} }

// Close implements link.Link. It may be called from any goroutine: it
// wakes a Wait and returns once the owner is out of its call and the
// socket is closed.
func (l *Link) Close() error {
	l.c.Close(l.release)
	return nil
}

func (l *Link) release() {
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
	l.c.Free()
}
