package main

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync/atomic"
	"unsafe"
)

// An entry is a seqlock-protected slot, FaRM style: the writer makes the
// head version odd, writes the fields, stores the new even version in the
// tail, the CRC (which covers the tail) and last the head. A reader (here: an RDMA READ that the server's
// CPU never sees) copies the whole entry and accepts it only when head ==
// tail, the version is even and the CRC over version and contents matches.
// The CRC is what catches a torn copy whatever order the bytes were copied
// in (a NIC's DMA, like the engine's copy, promises no order within a READ).
//
//	0   head version  uint64
//	8   CRC-32C       uint32 (of tail version, lengths, key, value)
//	12  key length    uint16 (0: empty)
//	14  value length  uint16
//	16  key           [KeyMax]byte
//	48  value         [valMax]byte
//	..  tail version  uint64
const (
	KeyMax    = 32
	entryHead = 16 + KeyMax
)

var (
	// ErrNotFound means the key is not in the table.
	ErrNotFound = errors.New("key not found")
	// ErrFull means the key's neighbourhood has no free entry.
	ErrFull = errors.New("neighbourhood full")
	// ErrTorn means an entry stayed inconsistent until the deadline.
	ErrTorn = errors.New("entry inconsistent")
	// ErrBadKey means an empty key or one longer than KeyMax.
	ErrBadKey = errors.New("bad key")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Layout is what a client needs to find an entry: the server sends it once.
type Layout struct {
	Buckets int // hash buckets; the table has Buckets+Hood-1 entries
	Hood    int // neighbourhood: a key lives in one of Hood entries from its bucket
	ValMax  int // value capacity, a multiple of 8
}

func (l Layout) entrySize() int { return entryHead + l.ValMax + 8 }
func (l Layout) entries() int   { return l.Buckets + l.Hood - 1 }
func (l Layout) size() int      { return l.entries() * l.entrySize() }

// bucket is where a key's neighbourhood starts (FNV-1a: both sides must
// agree, and it needs no seed).
func (l Layout) bucket(key []byte) int {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return int(h % uint64(l.Buckets))
}

// entry is a view of one entry's bytes.
type entry []byte

func (e entry) head() uint64 { return binary.LittleEndian.Uint64(e) }
func (e entry) tail() uint64 { return binary.LittleEndian.Uint64(e[len(e)-8:]) }
func (e entry) crc() uint32  { return binary.LittleEndian.Uint32(e[8:]) }
func (e entry) key() []byte  { return e[16 : 16+min(int(binary.LittleEndian.Uint16(e[12:])), KeyMax)] }
func (e entry) value() []byte {
	return e[entryHead : entryHead+min(int(binary.LittleEndian.Uint16(e[14:])), len(e)-8-entryHead)]
}

// sum is the entry's CRC: over the tail version (the writer stores it
// before computing the CRC), the lengths, key and value. Reading the version
// from the entry itself, rather than from a buffer, keeps the check free of
// allocations.
func (e entry) sum() uint32 {
	c := crc32.Update(0, castagnoli, e[len(e)-8:])
	c = crc32.Update(c, castagnoli, e[12:16])
	c = crc32.Update(c, castagnoli, e.key())
	return crc32.Update(c, castagnoli, e.value())
}

// consistent is the reader's check on a copied entry.
func (e entry) consistent() bool {
	v := e.head()
	return v == e.tail() && v&1 == 0 && e.sum() == e.crc()
}

// word is an entry's version word for atomic access. The table is mmap'd,
// so it is 8-byte aligned and the entry size is a multiple of 8.
func word(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// beginWrite makes a live entry's version odd: readers now retry.
func (e entry) beginWrite() uint64 {
	v := word(e).Load()
	word(e).Store(v + 1)
	return v + 2
}

// endWrite sets the fields and publishes version v (even): the tail, the
// CRC that covers it, and last the head.
func (e entry) endWrite(v uint64, key, value []byte) {
	binary.LittleEndian.PutUint16(e[12:], uint16(len(key)))
	binary.LittleEndian.PutUint16(e[14:], uint16(len(value)))
	copy(e[16:16+KeyMax], key)
	copy(e[entryHead:], value)
	word(e[len(e)-8:]).Store(v)
	binary.LittleEndian.PutUint32(e[8:], e.sum())
	word(e).Store(v)
}
