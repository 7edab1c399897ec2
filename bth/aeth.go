package bth

import "encoding/binary"

// AETH is a view of the ACK Extended Transport Header (IBA 9.3.5.1,
// 9.7.5.1.1): an 8-bit syndrome and a 24-bit message sequence number.
type AETH []byte

func (b AETH) Syndrome() Syndrome { return Syndrome(b[0]) }
func (b AETH) MSN() uint32        { return binary.BigEndian.Uint32(b) & msnMask }

// Encode writes the header.
func (b AETH) Encode(s Syndrome, msn uint32) {
	binary.BigEndian.PutUint32(b, uint32(s)<<24|msn&msnMask)
}

const msnMask = 0x00ffffff

// Syndrome is the AETH syndrome byte: bits 6-5 say ACK, RNR NAK or NAK;
// bits 4-0 are the credit count, the RNR timer code or the NAK code.
type Syndrome uint8

// AckKind is what a syndrome acknowledges.
type AckKind uint8

// Syndrome kinds (IBA Table 43).
const (
	KindACK      AckKind = 0
	KindRNRNAK   AckKind = 1
	KindReserved AckKind = 2
	KindNAK      AckKind = 3
)

var ackKindName = [...]string{"ACK", "RNR NAK", "reserved", "NAK"}

func (k AckKind) String() string { return ackKindName[k&3] }

// NAKCode is the reason a NAK gives (IBA Table 44).
type NAKCode uint8

// NAK codes.
const (
	NAKPSNSequenceError       NAKCode = 0
	NAKInvalidRequest         NAKCode = 1
	NAKRemoteAccessError      NAKCode = 2
	NAKRemoteOperationalError NAKCode = 3
	NAKInvalidRDRequest       NAKCode = 4
)

var nakName = [...]string{"PSN sequence error", "invalid request", "remote access error", "remote operational error", "invalid RD request"}

func (c NAKCode) String() string {
	if int(c) < len(nakName) {
		return nakName[c]
	}
	return "reserved NAK code"
}

// CreditsInvalid is the credit count that says end-to-end flow control
// credits are not being reported (IBA 9.7.7.2.5); rxe always sends it.
const CreditsInvalid = 0x1f

// ACK returns the syndrome of a positive acknowledgement with a credit count.
func ACK(credits uint8) Syndrome { return Syndrome(credits & 0x1f) }

// RNRNAK returns the syndrome of a receiver-not-ready NAK with an RNR timer
// code (IBA Table 45).
func RNRNAK(timer uint8) Syndrome { return Syndrome(uint8(KindRNRNAK)<<5 | timer&0x1f) }

// NAK returns the syndrome of a NAK with a code.
func NAK(c NAKCode) Syndrome { return Syndrome(uint8(KindNAK)<<5 | uint8(c)&0x1f) }

// Kind says whether the syndrome is an ACK, RNR NAK or NAK.
func (s Syndrome) Kind() AckKind { return AckKind(s >> 5 & 3) }

// Credits returns the credit count of an ACK.
func (s Syndrome) Credits() uint8 { return uint8(s) & 0x1f }

// RNRTimer returns the timer code of an RNR NAK.
func (s Syndrome) RNRTimer() uint8 { return uint8(s) & 0x1f }

// NAKCode returns the code of a NAK.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s & 0x1f) }

func (s Syndrome) String() string {
	switch s.Kind() {
	case KindACK:
		return "ACK"
	case KindRNRNAK:
		return "RNR NAK"
	case KindNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "reserved syndrome"
}

// RNRTimeout returns the RNR NAK timer for a 5-bit code, in microseconds
// (IBA Table 45: code 0 is 655.36 ms, codes 1-31 run from 0.01 to 491.52 ms).
func RNRTimeout(code uint8) float64 { return rnrTimeoutUS[code&0x1f] }

var rnrTimeoutUS = [32]float64{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}
