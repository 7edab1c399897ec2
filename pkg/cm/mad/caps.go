package mad

// Caps are uroce's own connection capabilities. A REQ and a REP carry
// them in bits IBA 12.6 marks reserved, which a sender zeroes and a
// receiver ignores: ib_cm (rxe, ConnectX) reads none of them and sends
// them zeroed, so a peer that is not uroce neither sees an offer nor makes
// one, and the connection stays standard RC. The private data is not
// used: rdma_cm applications own it.
//
// A REQ offers them in its reserved word, bytes 24-27, behind a magic
// number in bytes 24-25, so that reserved bits some other sender failed
// to zero cannot pass for an offer; byte 27 holds the Caps. A REP answers
// in the four reserved bits at the bottom of byte 27, with the Caps the
// passive side took, which are only ever ones the REQ offered.
type Caps uint8

const (
	// CapSelectiveRepeat: in a REQ, the active side's QP can do uroce's
	// selective repeat (qp.RetransSelective); in a REP, the passive side
	// turned it on, so both QPs must.
	CapSelectiveRepeat Caps = 1 << 0

	// capsREP are the Caps a REP has room for.
	capsREP Caps = 0x0f
)

// reqCapsMagic marks a REQ's reserved word as uroce's Caps ("uR").
const reqCapsMagic = 0x7552

const (
	reqCapsMagicOff = 24
	reqCaps         = 27
)

// UroceCaps returns the Caps a REQ offers: 0 unless its reserved word
// carries uroce's magic, as every REQ from ib_cm.
func (b REQ) UroceCaps() Caps {
	if u16(b, reqCapsMagicOff) != reqCapsMagic {
		return 0
	}
	return Caps(b[reqCaps])
}

// UroceCaps returns the Caps a REP says the passive side took.
func (b REP) UroceCaps() Caps { return Caps(getBits(b, repByte27, 0, 4)) }
