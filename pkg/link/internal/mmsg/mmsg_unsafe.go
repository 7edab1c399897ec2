//go:build linux

package mmsg

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nameLen is room for the largest address a batch carries: sockaddr_in6
// (28 bytes); sockaddr_ll is 20.
const nameLen = 32

// Batch is n message slots of one buffer each.
type Batch struct {
	hdrs     []unix.Mmsghdr
	iovs     []unix.Iovec
	names    [][nameLen]byte
	ctrl     []byte
	ctrlSize int
}

// New makes a batch of n slots with ctrlSize bytes of control space each.
func New(n, ctrlSize int) *Batch {
	b := &Batch{
		hdrs:     make([]unix.Mmsghdr, n),
		iovs:     make([]unix.Iovec, n),
		names:    make([][nameLen]byte, n),
		ctrl:     make([]byte, n*ctrlSize),
		ctrlSize: ctrlSize,
	}
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Iov = &b.iovs[i]
		h.Iovlen = 1
	}
	return b
}

// Cap returns the number of slots.
func (b *Batch) Cap() int { return len(b.hdrs) }

// SetBuf points slot i at buf.
func (b *Batch) SetBuf(i int, buf []byte) {
	b.iovs[i].Base = unsafe.SliceData(buf)
	b.iovs[i].SetLen(len(buf))
}

// Len returns the byte count of slot i after Recv.
func (b *Batch) Len(i int) int { return int(b.hdrs[i].Len) }

// Flags returns the msg_flags of slot i after Recv (MSG_TRUNC, MSG_CTRUNC).
func (b *Batch) Flags(i int) int { return int(b.hdrs[i].Hdr.Flags) }

// Control returns the control messages received in slot i.
func (b *Batch) Control(i int) []byte {
	return b.ctrl[i*b.ctrlSize : i*b.ctrlSize+int(b.hdrs[i].Hdr.Controllen)]
}

// Recv receives up to n datagrams without blocking into slots 0..n-1 and
// returns how many arrived; EAGAIN is (0, nil).
func (b *Batch) Recv(fd, n int) (int, error) {
	if n > len(b.hdrs) {
		n = len(b.hdrs)
	}
	for i := range n {
		h := &b.hdrs[i].Hdr
		h.Name = &b.names[i][0]
		h.Namelen = nameLen
		if b.ctrlSize > 0 {
			h.Control = &b.ctrl[i*b.ctrlSize]
		}
		h.Controllen = uint64(b.ctrlSize)
		h.Flags = 0
	}
	if n == 1 {
		// One slot: recvmsg(2), which skips recvmmsg's loop (about
		// 30 ns a call here, measured in a ping-pong's round trip).
		r, ok, err := dontwait(unix.SYS_RECVMSG, fd, unsafe.Pointer(&b.hdrs[0].Hdr), unix.MSG_DONTWAIT, 0, nil, 0)
		if !ok {
			return 0, err
		}
		b.hdrs[0].Len = uint32(r)
		return 1, nil
	}
	r, ok, err := dontwait(unix.SYS_RECVMMSG, fd, unsafe.Pointer(&b.hdrs[0]), uintptr(n), unix.MSG_DONTWAIT, nil, 0)
	if !ok {
		return 0, err
	}
	return int(r), nil
}

// Send sends slots from..to-1 and returns how many went; EAGAIN is
// (0, nil). Other errors concern slot from.
func (b *Batch) Send(fd, from, to int) (int, error) {
	if to <= from {
		return 0, nil
	}
	if to-from == 1 && b.hdrs[from].Hdr.Controllen == 0 {
		// One message with nothing but an address: sendto(2), which
		// skips copying in and checking a message header (about 75 ns
		// a send here, measured in a ping-pong's round trip).
		h := &b.hdrs[from].Hdr
		_, ok, err := dontwait(unix.SYS_SENDTO, fd, unsafe.Pointer(h.Iov.Base), uintptr(h.Iov.Len),
			unix.MSG_DONTWAIT, unsafe.Pointer(h.Name), uintptr(h.Namelen))
		if !ok {
			return 0, err
		}
		return 1, nil
	}
	r, ok, err := dontwait(unix.SYS_SENDMMSG, fd, unsafe.Pointer(&b.hdrs[from]), uintptr(to-from), unix.MSG_DONTWAIT, nil, 0)
	if !ok {
		return 0, err
	}
	return int(r), nil
}

// dontwait makes a socket call with MSG_DONTWAIT among its flags: it
// repeats it on EINTR and reports ok false, with no error, for EAGAIN.
// The call never sleeps, so it is made without telling the scheduler
// (RawSyscall6), which saves the entersyscall/exitsyscall pair on every
// poll and every batch (100-260 ns off a busy-polled UDP round trip here,
// measured against Syscall6 in alternating blocks of one run), as the
// AF_XDP socket's kick does. The four calls' arguments share one shape:
// fd, a pointer, two words, a second pointer (or nil) and a word. The
// pointers stay unsafe.Pointer until the system call itself, so what they
// point to is kept alive for it.
func dontwait(trap uintptr, fd int, p1 unsafe.Pointer, a2, a3 uintptr, p4 unsafe.Pointer, a5 uintptr) (r uintptr, ok bool, err error) {
	for {
		r, _, e := unix.RawSyscall6(trap, uintptr(fd), uintptr(p1), a2, a3, uintptr(p4), a5)
		switch e {
		case 0:
			return r, true, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, false, nil
		default:
			return 0, false, e
		}
	}
}

// ClearName makes slot i carry no address (a bound or connected socket).
func (b *Batch) ClearName(i int) {
	b.hdrs[i].Hdr.Name = nil
	b.hdrs[i].Hdr.Namelen = 0
}

// SetInet sets slot i's address to a sockaddr_in or sockaddr_in6.
func (b *Batch) SetInet(i int, ap netip.AddrPort) {
	n := &b.names[i]
	*n = [nameLen]byte{}
	a := ap.Addr()
	if a.Is4() || a.Is4In6() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(n))
		sa.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
		sa.Addr = a.Unmap().As4()
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	} else {
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(n))
		sa.Family = unix.AF_INET6
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
		sa.Addr = a.As16()
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
	}
	b.hdrs[i].Hdr.Name = &n[0]
}

// SetScope sets the scope (interface index) of slot i's IPv6 address, set
// by SetInet: a link-local destination needs one.
func (b *Batch) SetScope(i int, id uint32) {
	(*unix.RawSockaddrInet6)(unsafe.Pointer(&b.names[i])).Scope_id = id
}

// Inet returns slot i's address after Recv on an IP socket.
func (b *Batch) Inet(i int) netip.AddrPort {
	n := &b.names[i]
	switch binary.NativeEndian.Uint16(n[:]) {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(n))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), binary.BigEndian.Uint16(n[2:]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(n))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), binary.BigEndian.Uint16(n[2:]))
	}
	return netip.AddrPort{}
}

// PacketType returns sll_pkttype of slot i after Recv on a packet socket.
func (b *Batch) PacketType(i int) uint8 {
	return (*unix.RawSockaddrLinklayer)(unsafe.Pointer(&b.names[i])).Pkttype
}

// ResetControl empties slot i's outgoing control messages.
func (b *Batch) ResetControl(i int) {
	b.hdrs[i].Hdr.Control = nil
	b.hdrs[i].Hdr.Controllen = 0
}

// AddControlInt appends a control message carrying a C int to slot i.
func (b *Batch) AddControlInt(i int, level, typ int32, v int32) {
	h := &b.hdrs[i].Hdr
	base := i * b.ctrlSize
	off := int(h.Controllen)
	sp := unix.CmsgSpace(4)
	if off+sp > b.ctrlSize {
		panic("mmsg: control space exhausted")
	}
	c := b.ctrl[base+off : base+off+sp]
	clear(c)
	ch := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	ch.Level, ch.Type = level, typ
	ch.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(c[unix.CmsgLen(0):], uint32(v))
	h.Control = &b.ctrl[base]
	h.Controllen = uint64(off + sp)
}

// Cmsg walks control messages without allocating: it calls fn for each.
func Cmsg(c []byte, fn func(level, typ int32, data []byte)) {
	hl := unix.CmsgLen(0)
	for len(c) >= hl {
		ch := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		l := int(ch.Len)
		if l < hl || l > len(c) {
			return
		}
		fn(ch.Level, ch.Type, c[hl:l])
		sp := unix.CmsgSpace(l - hl)
		if sp > len(c) {
			return
		}
		c = c[sp:]
	}
}

// SetLinklayer sets slot i's address to a sockaddr_ll: the interface, the
// EtherType (host order) and the destination MAC address.
func (b *Batch) SetLinklayer(i int, ifindex int, proto uint16, mac [6]byte) {
	n := &b.names[i]
	*n = [nameLen]byte{}
	sa := (*unix.RawSockaddrLinklayer)(unsafe.Pointer(n))
	sa.Family = unix.AF_PACKET
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Protocol))[:], proto)
	sa.Ifindex = int32(ifindex)
	sa.Halen = 6
	copy(sa.Addr[:], mac[:])
	b.hdrs[i].Hdr.Name = &n[0]
	b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrLinklayer
}
