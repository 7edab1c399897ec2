package bth

// Opcode is the BTH opcode: the top three bits name the transport service
// (RC, UC, RD, UD, CNP), the low five the operation (IBA 9.2.1, Table 35).
type Opcode uint8

// Opcodes. The names follow the IBA and rxe (IB_OPCODE_RC_SEND_FIRST is
// RCSendFirst).
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0a
	RCWriteOnlyImm       Opcode = 0x0b
	RCReadRequest        Opcode = 0x0c
	RCReadResponseFirst  Opcode = 0x0d
	RCReadResponseMiddle Opcode = 0x0e
	RCReadResponseLast   Opcode = 0x0f
	RCReadResponseOnly   Opcode = 0x10
	RCAcknowledge        Opcode = 0x11
	RCAtomicAcknowledge  Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInvalidate Opcode = 0x16
	RCSendOnlyInvalidate Opcode = 0x17
	RCFlush              Opcode = 0x1c
	RCAtomicWrite        Opcode = 0x1d
	UCSendFirst          Opcode = 0x20
	UCSendMiddle         Opcode = 0x21
	UCSendLast           Opcode = 0x22
	UCSendLastImm        Opcode = 0x23
	UCSendOnly           Opcode = 0x24
	UCSendOnlyImm        Opcode = 0x25
	UCWriteFirst         Opcode = 0x26
	UCWriteMiddle        Opcode = 0x27
	UCWriteLast          Opcode = 0x28
	UCWriteLastImm       Opcode = 0x29
	UCWriteOnly          Opcode = 0x2a
	UCWriteOnlyImm       Opcode = 0x2b
	RDSendFirst          Opcode = 0x40
	RDSendMiddle         Opcode = 0x41
	RDSendLast           Opcode = 0x42
	RDSendLastImm        Opcode = 0x43
	RDSendOnly           Opcode = 0x44
	RDSendOnlyImm        Opcode = 0x45
	RDWriteFirst         Opcode = 0x46
	RDWriteMiddle        Opcode = 0x47
	RDWriteLast          Opcode = 0x48
	RDWriteLastImm       Opcode = 0x49
	RDWriteOnly          Opcode = 0x4a
	RDWriteOnlyImm       Opcode = 0x4b
	RDReadRequest        Opcode = 0x4c
	RDReadResponseFirst  Opcode = 0x4d
	RDReadResponseMiddle Opcode = 0x4e
	RDReadResponseLast   Opcode = 0x4f
	RDReadResponseOnly   Opcode = 0x50
	RDAcknowledge        Opcode = 0x51
	RDAtomicAcknowledge  Opcode = 0x52
	RDCompareSwap        Opcode = 0x53
	RDFetchAdd           Opcode = 0x54
	RDResync             Opcode = 0x55
	UDSendOnly           Opcode = 0x64
	UDSendOnlyImm        Opcode = 0x65
	CNP                  Opcode = 0x81
)

// Header names one header that can follow the BTH.
type Header uint8

// The extension headers, in the order IBA 9.2 places them after the BTH,
// and the payload.
const (
	HdrRDETH Header = iota
	HdrDETH
	HdrFETH
	HdrRETH
	HdrAtomicETH
	HdrImmDt
	HdrIETH
	HdrAETH
	HdrAtomicAckETH
	HdrCNP
	numHeaders
)

// Header lengths in bytes.
const (
	BTHLen          = 12
	RDETHLen        = 4
	DETHLen         = 8
	RETHLen         = 16
	AtomicETHLen    = 28
	FETHLen         = 4
	ImmDtLen        = 4
	IETHLen         = 4
	AETHLen         = 4
	AtomicAckETHLen = 8
	CNPLen          = 16 // the reserved body of a CNP
	ICRCLen         = 4
)

var headerLen = [numHeaders]int{
	HdrRDETH:        RDETHLen,
	HdrDETH:         DETHLen,
	HdrRETH:         RETHLen,
	HdrAtomicETH:    AtomicETHLen,
	HdrFETH:         FETHLen,
	HdrImmDt:        ImmDtLen,
	HdrIETH:         IETHLen,
	HdrAETH:         AETHLen,
	HdrAtomicAckETH: AtomicAckETHLen,
	HdrCNP:          CNPLen,
}

var headerName = [numHeaders]string{"RDETH", "DETH", "FETH", "RETH", "AtomicETH", "ImmDt", "IETH", "AETH", "AtomicAckETH", "CNP"}

// Len returns the header's length in bytes.
func (h Header) Len() int { return headerLen[h] }

func (h Header) String() string {
	if h < numHeaders {
		return headerName[h]
	}
	return "Header(?)"
}

// Mask holds an opcode's properties, as rxe's RXE_*_MASK bits do.
type Mask uint32

// Opcode properties.
const (
	// Has* say which headers follow the BTH; they are in Header order.
	HasRDETH Mask = 1 << iota
	HasDETH
	HasFETH
	HasRETH
	HasAtomicETH
	HasImmDt
	HasIETH
	HasAETH
	HasAtomicAckETH
	HasCNP
	// HasPayload: the packet may carry payload (and a pad).
	HasPayload
	// Request: sent by a requester; Response: sent by a responder (ACKs
	// and READ responses).
	Request
	Response
	// The operation class.
	Send
	Write
	Read
	Atomic
	Flush
	AtomicWrite
	// First, Middle, Last: the packet's place in a message. A single
	// packet message (ONLY) has both First and Last.
	First
	Middle
	Last
	// ConsumesRecv: the message consumes a receive WQE at the responder
	// (rxe's RXE_RWR_MASK sits on the first packet; this sits on every
	// packet of such a message).
	ConsumesRecv
	// Completes: the packet completes a receive at the responder
	// (rxe's RXE_COMP_MASK).
	Completes
)

// OpcodeInfo describes one opcode: its name, properties and the offset of
// each header that follows the BTH.
type OpcodeInfo struct {
	Name string
	Mask Mask
	// Length is the BTH plus every extension header: where payload starts.
	Length int
	// Offset of each header from the start of the BTH; valid where the
	// Mask has the matching Has bit.
	Offset [numHeaders]uint8
}

// Has reports whether every property in m holds.
func (i *OpcodeInfo) Has(m Mask) bool { return i.Mask&m == m }

// opcodes is the opcode table, indexed by opcode. Entries with an empty
// name are reserved opcodes.
var opcodes = [256]OpcodeInfo{}

// entry builds a table entry from its headers in wire order.
func entry(name string, m Mask, hdrs ...Header) OpcodeInfo {
	info := OpcodeInfo{Name: name, Mask: m, Length: BTHLen}
	for _, h := range hdrs {
		info.Mask |= HasRDETH << h
		info.Offset[h] = uint8(info.Length)
		info.Length += h.Len()
	}
	return info
}

func init() {
	const (
		send     = Request | Send | HasPayload
		write    = Request | Write | HasPayload
		only     = First | Last
		readResp = Response | Read | HasPayload
	)
	type op struct {
		o    Opcode
		name string
		m    Mask
		hdrs []Header
	}
	// The operations common to RC, UC and RD (IBA Table 35), keyed by the
	// low five bits; which services have each is decided below.
	common := []op{
		{0x00, "SEND_FIRST", send | First | ConsumesRecv, nil},
		{0x01, "SEND_MIDDLE", send | Middle | ConsumesRecv, nil},
		{0x02, "SEND_LAST", send | Last | ConsumesRecv | Completes, nil},
		{0x03, "SEND_LAST_WITH_IMMEDIATE", send | Last | ConsumesRecv | Completes, []Header{HdrImmDt}},
		{0x04, "SEND_ONLY", send | only | ConsumesRecv | Completes, nil},
		{0x05, "SEND_ONLY_WITH_IMMEDIATE", send | only | ConsumesRecv | Completes, []Header{HdrImmDt}},
		{0x06, "RDMA_WRITE_FIRST", write | First, []Header{HdrRETH}},
		{0x07, "RDMA_WRITE_MIDDLE", write | Middle, nil},
		{0x08, "RDMA_WRITE_LAST", write | Last, nil},
		{0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", write | Last | ConsumesRecv | Completes, []Header{HdrImmDt}},
		{0x0a, "RDMA_WRITE_ONLY", write | only, []Header{HdrRETH}},
		{0x0b, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", write | only | ConsumesRecv | Completes, []Header{HdrRETH, HdrImmDt}},
		{0x0c, "RDMA_READ_REQUEST", Request | Read | only, []Header{HdrRETH}},
		{0x0d, "RDMA_READ_RESPONSE_FIRST", readResp | First, []Header{HdrAETH}},
		{0x0e, "RDMA_READ_RESPONSE_MIDDLE", readResp | Middle, nil},
		{0x0f, "RDMA_READ_RESPONSE_LAST", readResp | Last, []Header{HdrAETH}},
		{0x10, "RDMA_READ_RESPONSE_ONLY", readResp | only, []Header{HdrAETH}},
		{0x11, "ACKNOWLEDGE", Response | only, []Header{HdrAETH}},
		{0x12, "ATOMIC_ACKNOWLEDGE", Response | Atomic | only, []Header{HdrAETH, HdrAtomicAckETH}},
		{0x13, "COMPARE_SWAP", Request | Atomic | only, []Header{HdrAtomicETH}},
		{0x14, "FETCH_ADD", Request | Atomic | only, []Header{HdrAtomicETH}},
	}
	for _, c := range common {
		// RC: everything above.
		opcodes[c.o] = entry("RC_"+c.name, c.m, c.hdrs...)
		// UC: sends and writes only.
		if c.o <= 0x0b {
			opcodes[0x20|c.o] = entry("UC_"+c.name, c.m, c.hdrs...)
		}
		// RD: every operation, behind RDETH; every request also carries DETH.
		hdrs := []Header{HdrRDETH}
		if c.m&Request != 0 {
			hdrs = append(hdrs, HdrDETH)
		}
		opcodes[0x40|c.o] = entry("RD_"+c.name, c.m, append(hdrs, c.hdrs...)...)
	}
	opcodes[RDResync] = entry("RD_RESYNC", Request|only, HdrRDETH, HdrDETH)

	// RC only: SEND with invalidate (IBA 1.2), FLUSH and ATOMIC WRITE
	// (IBA 1.5, as rxe implements them).
	opcodes[RCSendLastInvalidate] = entry("RC_SEND_LAST_WITH_INVALIDATE", send|Last|ConsumesRecv|Completes, HdrIETH)
	opcodes[RCSendOnlyInvalidate] = entry("RC_SEND_ONLY_WITH_INVALIDATE", send|only|ConsumesRecv|Completes, HdrIETH)
	opcodes[RCFlush] = entry("RC_FLUSH", Request|Flush|only, HdrFETH, HdrRETH)
	opcodes[RCAtomicWrite] = entry("RC_ATOMIC_WRITE", Request|AtomicWrite|HasPayload|only, HdrRETH)

	// UD: single-packet sends with DETH.
	opcodes[UDSendOnly] = entry("UD_SEND_ONLY", send|only|ConsumesRecv|Completes, HdrDETH)
	opcodes[UDSendOnlyImm] = entry("UD_SEND_ONLY_WITH_IMMEDIATE", send|only|ConsumesRecv|Completes, HdrDETH, HdrImmDt)

	// RoCEv2 Congestion Notification Packet (IBA Annex A17.9.3).
	opcodes[CNP] = entry("CNP", only, HdrCNP)

	// uroce's selective acknowledgement (sr.go), in the manufacturer-
	// specific range: an ACKNOWLEDGE with a bitmap for payload.
	opcodes[SelectiveAck] = entry("RC_UROCE_SELECTIVE_ACK", Response|only|HasPayload, HdrAETH)
}

// Info returns the opcode's table entry, or nil for a reserved opcode.
func (o Opcode) Info() *OpcodeInfo {
	info := &opcodes[o]
	if info.Name == "" {
		return nil
	}
	return info
}

// Valid reports whether the opcode is one the table knows.
func (o Opcode) Valid() bool { return opcodes[o].Name != "" }

// Has reports whether the opcode has every property in m; false for
// reserved opcodes.
func (o Opcode) Has(m Mask) bool { return opcodes[o].Mask&m == m && opcodes[o].Name != "" }

// HeaderLen returns the length of the BTH and the extension headers: the
// offset of the payload. It is 0 for reserved opcodes.
func (o Opcode) HeaderLen() int { return opcodes[o].Length }

func (o Opcode) String() string {
	if name := opcodes[o].Name; name != "" {
		return name
	}
	const hex = "0123456789abcdef"
	return "Opcode(0x" + string([]byte{hex[o>>4], hex[o&15]}) + ")"
}

// Service is the transport service an opcode belongs to.
type Service uint8

// Transport services (IBA Table 35, opcode bits 7-5), and CNP.
const (
	ServiceRC Service = iota
	ServiceUC
	ServiceRD
	ServiceUD
	ServiceCNP
	ServiceReserved
)

var serviceName = [...]string{"RC", "UC", "RD", "UD", "CNP", "reserved"}

func (s Service) String() string {
	if int(s) < len(serviceName) {
		return serviceName[s]
	}
	return "Service(?)"
}

// Service returns the transport service of the opcode.
func (o Opcode) Service() Service {
	switch o >> 5 {
	case 0:
		return ServiceRC
	case 1:
		return ServiceUC
	case 2:
		return ServiceRD
	case 3:
		return ServiceUD
	case 4:
		return ServiceCNP
	}
	if o == SelectiveAck {
		// Manufacturer-specific, and part of uroce's RC (sr.go).
		return ServiceRC
	}
	return ServiceReserved
}
