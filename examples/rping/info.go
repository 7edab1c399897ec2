package main

import (
	"encoding/binary"
	"fmt"
)

// infoSize is the size of rping's struct rping_rdma_info: the buffer's
// address, its rkey and its length, big-endian, in one SEND.
const infoSize = 16

// info is what each side advertises: where the peer may READ from or
// WRITE to.
type info struct {
	Addr uint64
	RKey uint32
	Size uint32
}

func (i info) marshal(b []byte) {
	binary.BigEndian.PutUint64(b[0:], i.Addr)
	binary.BigEndian.PutUint32(b[8:], i.RKey)
	binary.BigEndian.PutUint32(b[12:], i.Size)
}

// parseInfo reads an advertisement; rping rejects any other length
// ("Received bogus data").
func parseInfo(b []byte) (info, error) {
	if len(b) != infoSize {
		return info{}, fmt.Errorf("received bogus data, size %d", len(b))
	}
	return info{Addr: binary.BigEndian.Uint64(b[0:]), RKey: binary.BigEndian.Uint32(b[8:]), Size: binary.BigEndian.Uint32(b[12:])}, nil
}
