package rsocket

import (
	"encoding/binary"
	"fmt"
)

// Wire constants of librdmacm's rsocket.c (stream sockets only).
const (
	// Version is the only rs_conn_data version rsocket.c accepts
	// (rs_accept and rs_do_connect refuse any other).
	Version = 1

	// ConnDataLen is the length of the connect message (struct
	// rs_conn_data): 8 bytes of header and two 16-byte SGEs.
	ConnDataLen = 40
	// SGELen is the length of one struct rs_sge as it is written into a
	// peer's target SGL.
	SGELen = 16

	// FlagNet (RS_CONN_FLAG_NET) says the sender's host is big-endian,
	// so the SGEs it writes into the peer's memory are big-endian too.
	FlagNet = 1 << 0
	// FlagIOMap (RS_CONN_FLAG_IOMAP) says an iomap table follows the
	// sender's target SGL; uroce offers none.
	FlagIOMap = 1 << 1

	// IOMapLen is the length of one struct rs_iomap in a target iomap
	// table: the peer's offset for the region, then its SGE.
	IOMapLen = 8 + SGELen

	// sglSize is RS_SGL_SIZE: a receiver grants its ring in halves, and
	// the sender's target SGL has one slot for each.
	sglSize = 2
	// ctrlSize is RS_QP_CTRL_SIZE: control messages in flight at once.
	ctrlSize = 4
	// sndLowat is RS_SNDLOWAT: a sender waits for this much free send
	// buffer before it writes.
	sndLowat = 2048
	// olapStart and maxTransfer are RS_OLAP_START_SIZE and
	// RS_MAX_TRANSFER: one send call writes in chunks that start at 2 KiB
	// and double up to 64 KiB, so the first bytes leave early.
	olapStart   = 2048
	maxTransfer = 65536
)

// Op is the message type in the top three bits of the immediate data
// (rsocket.c's RS_OP_*).
type Op uint8

const (
	OpData     Op = 0 // bytes written into the ring; data is their count
	opWrite    Op = 2 // RS_OP_WRITE: a send WR's ID only, never on the wire
	OpSGL      Op = 4 // credit update; data is the new send sequence limit
	OpIOMapSGL Op = 6 // an iomap entry was written; data is its index
	OpCtrl     Op = 7 // control; data is a Ctrl
)

// Ctrl is an OpCtrl message's data (RS_CTRL_*).
type Ctrl uint32

const (
	CtrlDisconnect Ctrl = 0 // no more data either way
	CtrlKeepalive  Ctrl = 1 // zero-length probe
	CtrlShutdown   Ctrl = 2 // the sender will write no more (SHUT_WR)
)

// dataMask keeps the low 29 bits of an immediate: a byte count, a
// sequence number or a control code.
const dataMask = 1<<29 - 1

// Msg is an rsocket message as it travels in a WRITE WITH IMMEDIATE's
// immediate data (host order, as verbs hands it over).
type Msg uint32

// MakeMsg builds a message (rs_msg_set).
func MakeMsg(op Op, data uint32) Msg { return Msg(uint32(op)<<29 | data&dataMask) }

// Op returns the message type (rs_msg_op).
func (m Msg) Op() Op { return Op(m >> 29) }

// Data returns the low 29 bits (rs_msg_data).
func (m Msg) Data() uint32 { return uint32(m) & dataMask }

func (m Msg) String() string {
	switch m.Op() {
	case OpData:
		return fmt.Sprintf("data(%d)", m.Data())
	case OpSGL:
		return fmt.Sprintf("sgl(credits to %d)", m.Data())
	case OpIOMapSGL:
		return fmt.Sprintf("iomap(%d)", m.Data())
	case OpCtrl:
		switch Ctrl(m.Data()) {
		case CtrlDisconnect:
			return "disconnect"
		case CtrlKeepalive:
			return "keepalive"
		case CtrlShutdown:
			return "shutdown"
		}
		return fmt.Sprintf("ctrl(%d)", m.Data())
	}
	return fmt.Sprintf("op%d(%d)", m.Op(), m.Data())
}

// Valid reports whether a peer may send m on a stream: rsocket.c's
// receiver ignores reserved ops and unknown control codes, and so do we,
// but a test of a decoder wants to know.
func (m Msg) Valid() bool {
	switch m.Op() {
	case OpData, OpSGL, OpIOMapSGL:
		return true
	case OpCtrl:
		return Ctrl(m.Data()) <= CtrlShutdown
	}
	return false
}

// SGE is a remote buffer (struct rs_sge): where a peer may write, with
// which key, how many bytes.
type SGE struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// Encode writes s into b (at least SGELen bytes) in the given order.
func (s SGE) Encode(b []byte, order binary.ByteOrder) {
	order.PutUint64(b[0:], s.Addr)
	order.PutUint32(b[8:], s.Key)
	order.PutUint32(b[12:], s.Length)
}

// DecodeSGE reads an SGE from b, which must hold SGELen bytes.
func DecodeSGE(b []byte, order binary.ByteOrder) SGE {
	return SGE{Addr: order.Uint64(b[0:]), Key: order.Uint32(b[8:]), Length: order.Uint32(b[12:])}
}

// ConnData is the connect message both sides put in the CM's private
// data (struct rs_conn_data). Its multi-byte fields travel big-endian
// (rs_format_conn_data uses htobe*), whatever the hosts are.
type ConnData struct {
	Version uint8
	Flags   uint8
	// Credits is how many messages the sender may have unread at the
	// receiver: its receive queue depth.
	Credits uint16
	// TargetIOMapSize is the iomap table's size as a power-of-two code
	// (rs_value_to_scale); 0 for none.
	TargetIOMapSize uint8
	// TargetSGL is the sender's target SGL: where the peer writes the
	// SGEs of its credit updates (Length counts entries, 2).
	TargetSGL SGE
	// DataBuf is the first half of the sender's receive ring.
	DataBuf SGE
}

// Encode writes c into b (at least ConnDataLen bytes).
func (c *ConnData) Encode(b []byte) {
	b[0] = c.Version
	b[1] = c.Flags
	binary.BigEndian.PutUint16(b[2:], c.Credits)
	b[4], b[5], b[6] = 0, 0, 0
	b[7] = c.TargetIOMapSize
	c.TargetSGL.Encode(b[8:], binary.BigEndian)
	c.DataBuf.Encode(b[24:], binary.BigEndian)
}

// ParseConnData reads a connect message from private data, which may be
// longer (the CM zero-pads it). It returns ErrShort or ErrVersion for
// what rsocket.c would reject, and checks what the stream needs to work.
func ParseConnData(b []byte) (ConnData, error) {
	if len(b) < ConnDataLen {
		return ConnData{}, ErrShort
	}
	c := ConnData{
		Version:         b[0],
		Flags:           b[1],
		Credits:         binary.BigEndian.Uint16(b[2:]),
		TargetIOMapSize: b[7],
		TargetSGL:       DecodeSGE(b[8:], binary.BigEndian),
		DataBuf:         DecodeSGE(b[24:], binary.BigEndian),
	}
	if c.Version != Version {
		return c, fmt.Errorf("%w %d", ErrVersion, c.Version)
	}
	if c.Credits == 0 || c.TargetSGL.Length == 0 || c.DataBuf.Length == 0 {
		return c, fmt.Errorf("rsocket: connect message offers no credits or buffer: %+v", c)
	}
	return c, nil
}

// sgeOrder is the byte order in which a peer with the given flags wants
// the SGEs we write into its target SGL (rs_save_conn_data sets
// RS_OPT_SWAP_SGL when the two hosts differ; we write the peer's order).
func sgeOrder(peerFlags uint8) binary.ByteOrder {
	if peerFlags&FlagNet != 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// IOMap is an entry of a target iomap table (struct rs_iomap): the
// region a peer registered with riomap, and the offset it named it by.
type IOMap struct {
	Offset uint64
	SGE    SGE
}

// Encode writes m into b (at least IOMapLen bytes) in the given order.
func (m IOMap) Encode(b []byte, order binary.ByteOrder) {
	order.PutUint64(b, m.Offset)
	m.SGE.Encode(b[8:], order)
}

// DecodeIOMap reads an entry from b, which must hold IOMapLen bytes.
func DecodeIOMap(b []byte, order binary.ByteOrder) IOMap {
	return IOMap{Offset: order.Uint64(b), SGE: DecodeSGE(b[8:], order)}
}

// scaleToValue and valueToScale are rs_scale_to_value and
// rs_value_to_scale for 8 bits: sizes up to 128 as they are, larger ones
// as a multiple of 256 with the top bit set.
func scaleToValue(v uint8) int {
	if v <= 1<<7 {
		return int(v)
	}
	return int(v&^(1<<7)) << 8
}

func valueToScale(v int) uint8 {
	if v <= 1<<7 {
		return uint8(v)
	}
	return uint8(1<<7 | v>>8)
}
