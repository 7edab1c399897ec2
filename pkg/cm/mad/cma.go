package mad

import (
	"fmt"
	"net/netip"
)

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space in
// rdma_user_cm.h): which kind of socket-like service a port number names.
type PortSpace uint16

// Port spaces.
const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC connections: rping, perftest -R
	PortSpaceUDP   PortSpace = 0x0111 // UD, resolved with SIDR
	PortSpaceIB    PortSpace = 0x013f
)

func (p PortSpace) String() string {
	switch p {
	case PortSpaceIPoIB:
		return "IPoIB"
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	}
	return fmt.Sprintf("PortSpace(%#04x)", uint16(p))
}

// ipServiceMask keeps the port-space part of an IP CM service ID
// (RDMA_IB_IP_PS_MASK in the kernel's rdma_cm_ib.h).
const ipServiceMask = 0xffffffffffff0000

// IPServiceID returns the service ID rdma_cm puts in a REQ or SIDR_REQ for
// an IP address's port (cma_get_service_id in cma.c: port space in bits
// 31-16, port in 15-0), e.g. 0x0000000001061c06 for TCP port 7174.
func IPServiceID(ps PortSpace, port uint16) uint64 {
	return uint64(ps)<<16 | uint64(port)
}

// ParseIPServiceID splits an IP CM service ID into its port space and
// port; ok is false when the ID is not in the IP CM range for TCP, UDP or
// IPoIB (the IB port space carries no IP header).
func ParseIPServiceID(id uint64) (ps PortSpace, port uint16, ok bool) {
	ps = PortSpace(id & ipServiceMask >> 16)
	if id&ipServiceMask != uint64(ps)<<16 {
		return 0, 0, false
	}
	switch ps {
	case PortSpaceTCP, PortSpaceUDP, PortSpaceIPoIB:
		return ps, uint16(id), true
	}
	return 0, 0, false
}

// CMAVersion is the only rdma_cm private-data header version (CMA_VERSION
// in cma.c).
const CMAVersion = 0x00

// CMAHeaderLen is the length of the rdma_cm header; what is left of the
// REQ private data (92-36 = 56 bytes) is the application's, which is why
// librdmacm caps rdma_connect's private data at 56 on IB/RoCE.
const CMAHeaderLen = 36

// CMAHeader is a view of the header rdma_cm puts at the start of a REQ's
// (and SIDR_REQ's) private data for IP-addressed services (struct cma_hdr
// in the kernel's cma.c, written by cma_format_hdr).
//
//	0   version (0)
//	1   IP version(4) reserved(4)
//	2   source port (the active side's)
//	4   source address (16 bytes: IPv6, or 12 zero bytes and IPv4)
//	20  destination address (16 bytes)
//
// The destination port is not here: it is the low 16 bits of the service
// ID.
type CMAHeader []byte

// CMAHeaderFields holds the fields of a CMAHeader.
type CMAHeaderFields struct {
	Version   uint8
	IPVersion uint8 // 4 or 6
	SrcPort   uint16
	Src, Dst  netip.Addr
}

const (
	cmaVersion   = 0
	cmaIPVersion = 1
	cmaPort      = 2
	cmaSrc       = 4
	cmaDst       = 20
)

// Check reports whether the header is long enough and one librdmacm
// writes (version 0, IP version 4 or 6), with an error wrapping
// ErrTruncated or ErrBadCMAHeader. Call it before the accessors.
func (b CMAHeader) Check() error {
	if len(b) < CMAHeaderLen {
		return fmt.Errorf("rdma_cm header: %d of %d bytes: %w", len(b), CMAHeaderLen, ErrTruncated)
	}
	if v := b.Version(); v != CMAVersion {
		return fmt.Errorf("rdma_cm header: version %d: %w", v, ErrBadCMAHeader)
	}
	if v := b.IPVersion(); v != 4 && v != 6 {
		return fmt.Errorf("rdma_cm header: IP version %d: %w", v, ErrBadCMAHeader)
	}
	return nil
}

func (b CMAHeader) Version() uint8   { return b[cmaVersion] }
func (b CMAHeader) IPVersion() uint8 { return b[cmaIPVersion] >> 4 }
func (b CMAHeader) SrcPort() uint16  { return u16(b, cmaPort) }
func (b CMAHeader) Src() netip.Addr  { return b.addr(cmaSrc) }
func (b CMAHeader) Dst() netip.Addr  { return b.addr(cmaDst) }

// addr reads an address the way cma_save_ip4_info/ip6_info do: for IPv4
// only the last four bytes count (the union's ip4.addr).
func (b CMAHeader) addr(off int) netip.Addr {
	if b.IPVersion() == 4 {
		return netip.AddrFrom4([4]byte(b[off+12 : off+16]))
	}
	return netip.AddrFrom16([16]byte(b[off : off+16]))
}

// Fields returns the header's fields.
func (b CMAHeader) Fields() CMAHeaderFields {
	return CMAHeaderFields{b.Version(), b.IPVersion(), b.SrcPort(), b.Src(), b.Dst()}
}

// Encode writes the header. For IP version 4, Src and Dst are written as
// IPv4 (IPv4-mapped addresses are unmapped) after 12 zero bytes, as
// cma_format_hdr does; an address that does not fit is written as zeros.
func (b CMAHeader) Encode(f *CMAHeaderFields) {
	_ = b[CMAHeaderLen-1]
	b[cmaVersion] = f.Version
	b[cmaIPVersion] = f.IPVersion << 4
	put16(b, cmaPort, f.SrcPort)
	b.putAddr(cmaSrc, f.IPVersion, f.Src)
	b.putAddr(cmaDst, f.IPVersion, f.Dst)
}

func (b CMAHeader) putAddr(off int, ipv uint8, a netip.Addr) {
	clear(b[off : off+16])
	switch {
	case ipv == 4 && a.Unmap().Is4():
		a4 := a.Unmap().As4()
		copy(b[off+12:off+16], a4[:])
	case ipv != 4 && a.IsValid():
		a16 := a.As16()
		copy(b[off:off+16], a16[:])
	}
}
