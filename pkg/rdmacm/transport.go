package rdmacm

import "github.com/uroce/uroce/pkg/cm"

// transport carries MADs between QP1s: the seam between the CM loop and
// the device's GSI QP, so the loop's logic can be tested over an
// in-memory network.
type transport interface {
	// SendMAD sends one 256-byte MAD to dst's QP1 and is done with b
	// when it returns (cm.MADSender).
	SendMAD(dst cm.Address, b []byte) error
	// Incoming delivers the MADs QP1 receives, with their source.
	Incoming() <-chan datagram
	// Close stops the transport; Incoming is not closed.
	Close() error
}

// datagram is one received MAD and where it came from.
type datagram struct {
	src cm.Address
	b   []byte
}
