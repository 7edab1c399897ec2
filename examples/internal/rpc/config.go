package rpc

import (
	"encoding/binary"

	"github.com/uroce/uroce/verbs"
)

// HeaderLen is the size of the header in front of every request and reply:
// a method (requests) or status (replies), and two reserved bytes.
const HeaderLen = 4

// recvTag marks receive WR IDs, so a completion's WRID alone says which queue
// it came from (as many verbs programs do instead of switching on opcode).
const recvTag = 1 << 63

// Config sizes a connection; both sides of one must agree on it.
type Config struct {
	// Slots is how many requests one client may have in flight, and how many
	// receive buffers each side posts; 0 means 64, at most 1<<16.
	Slots int
	// MaxMsg is the largest request or reply body, and the largest READ;
	// 0 means 4096.
	MaxMsg int
	// MaxConns bounds a server's connections (it sizes the shared CQ);
	// 0 means 16.
	MaxConns int
	// Connect are the QP attributes; zero fields take verbs' defaults, but
	// Access defaults to remote read only (the server's regions decide the
	// rest through their own access flags).
	Connect verbs.ConnectOptions
}

func (c Config) withDefaults() Config {
	if c.Slots <= 0 {
		c.Slots = 64
	}
	c.Slots = min(c.Slots, 1<<16)
	if c.MaxMsg <= 0 {
		c.MaxMsg = 4096
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	if c.Connect.Access == 0 {
		c.Connect.Access = verbs.AccessRemoteRead
	}
	return c
}

// bufLen is one receive buffer: header and the largest body.
func (c Config) bufLen() int { return HeaderLen + c.MaxMsg }

func putHeader(b []byte, v uint16) { binary.BigEndian.PutUint32(b, uint32(v)<<16) }

func header(b []byte) uint16 { return uint16(binary.BigEndian.Uint32(b) >> 16) }

// requestID packs a slot index and generation into the immediate data.
func requestID(slot int, gen uint16) uint32 { return uint32(gen)<<16 | uint32(slot) }

func splitID(id uint32) (slot int, gen uint16) { return int(id & 0xffff), uint16(id >> 16) }
