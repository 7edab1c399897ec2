package mad

import "errors"

// Errors returned by the decoders. They are wrapped with detail; test for
// them with errors.Is.
var (
	// ErrTruncated means the bytes end before the MAD or header does.
	ErrTruncated = errors.New("truncated MAD")
	// ErrBadLength means the datagram is longer than a MAD: QP1 carries
	// exactly 256 bytes (IBA 13.4.1).
	ErrBadLength = errors.New("bad MAD length")
	// ErrBadBaseVersion means the base version is not 1 (IBA 13.4.2).
	ErrBadBaseVersion = errors.New("bad MAD base version")
	// ErrNotCM means the management class is not the CM class (0x07).
	ErrNotCM = errors.New("not a CM MAD")
	// ErrBadClassVersion means the CM class version is not 2 (IBA 12.11:
	// the only version the IBA and Linux's ib_cm speak).
	ErrBadClassVersion = errors.New("bad CM class version")
	// ErrBadMethod means the method is not one the CM class uses for its
	// attribute: CM messages are all Send (IBA 12.11, Table 102).
	ErrBadMethod = errors.New("bad MAD method")
	// ErrUnknownAttr means the attribute ID is not a CM message.
	ErrUnknownAttr = errors.New("unknown CM attribute")
	// ErrBadCMAHeader means rdma_cm's private-data header is not one
	// librdmacm writes: wrong version or IP version.
	ErrBadCMAHeader = errors.New("bad rdma_cm header")
)
