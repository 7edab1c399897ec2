package qp

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
)

// Memory keys are what stands between a peer and a region: a WRITE, READ
// or atomic lands if its R_Key names a region that allows it and the range
// fits (IBA 10.6.3). rxe builds its keys as index<<8 with a random low
// byte (rxe_get_next_key), so one key tells the index of the next region
// and leaves 8 bits to guess. Here a key is the encryption of the slot's
// index and generation under a block cipher with 32-bit blocks and a key
// drawn at random per table: every key is a different 32-bit value, all of
// them look random, and knowing any number of them tells nothing about
// another. Decryption gives the slot back, so a lookup stays O(1) and
// allocates nothing; a small table of the keys seen last (MRTable.recent)
// spares the common case the cipher's rounds.

const (
	// keyGenBits is the width of a slot's generation inside a key: a
	// slot registered again takes the next one, so the key of a region
	// comes back only after 4096 registrations of the same slot.
	keyGenBits = 12
	keyGenMask = 1<<keyGenBits - 1
	// maxMRSlots bounds the table: the slot index has the key's other
	// 20 bits (a million regions, the number rxe allows).
	maxMRSlots = 1 << (32 - keyGenBits)
)

// speckRounds is Speck32/64's number of rounds.
const speckRounds = 22

// keyCipher is Speck32/64 (Beaulieu et al., "The SIMON and SPECK Families
// of Lightweight Block Ciphers", 2013): a 32-bit block, a 64-bit key, 22
// add-rotate-xor rounds on 16-bit words. It is a permutation of the 32-bit
// values, so distinct slots never share a key, and it costs a few
// nanoseconds each way.
type keyCipher struct {
	rk [speckRounds]uint16
}

// newKeyCipher expands a 64-bit key, given as Speck's key words
// (l2, l1, l0, k0) from the most significant down.
func newKeyCipher(key uint64) keyCipher {
	var c keyCipher
	k := uint16(key)
	l := [speckRounds + 2]uint16{uint16(key >> 16), uint16(key >> 32), uint16(key >> 48)}
	for i := range speckRounds {
		c.rk[i] = k
		if i == speckRounds-1 {
			break
		}
		l[i+3] = (k + bits.RotateLeft16(l[i], -7)) ^ uint16(i)
		k = bits.RotateLeft16(k, 2) ^ l[i+3]
	}
	return c
}

// encrypt maps a block, the high half as Speck's x word and the low as y.
func (c *keyCipher) encrypt(v uint32) uint32 {
	x, y := uint16(v>>16), uint16(v)
	for _, k := range c.rk {
		x = (bits.RotateLeft16(x, -7) + y) ^ k
		y = bits.RotateLeft16(y, 2) ^ x
	}
	return uint32(x)<<16 | uint32(y)
}

// decrypt is encrypt's inverse.
func (c *keyCipher) decrypt(v uint32) uint32 {
	x, y := uint16(v>>16), uint16(v)
	for i := speckRounds - 1; i >= 0; i-- {
		y = bits.RotateLeft16(y^x, -2)
		x = bits.RotateLeft16((x^c.rk[i])-y, 7)
	}
	return uint32(x)<<16 | uint32(y)
}

// randomKeyCipher returns a cipher under a key from the system's random
// source: nothing an attacker sees of one process tells another's keys.
func randomKeyCipher() keyCipher {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 on)
	return newKeyCipher(binary.LittleEndian.Uint64(b[:]))
}
