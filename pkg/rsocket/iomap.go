package rsocket

import (
	"errors"
	"fmt"
	"net"

	"github.com/uroce/uroce/verbs"
)

// IOMap registers buf so that the peer can IOWrite (riowrite) into it
// directly, by RDMA WRITE with no message, at offsets from offset to
// offset+len(buf) (riomap with PROT_WRITE); an offset of -1 means buf's
// address. It tells the peer at once, by writing the entry into its
// iomap table. The peer's data is in buf when the peer says so by other
// means (rsocket leaves that to the application: riostream polls the
// last byte). buf must stay alive until IOUnmap or Close.
func (c *Conn) IOMap(buf []byte, offset int64) (int64, error) {
	if len(buf) == 0 {
		return 0, c.opError("iomap", errors.New("empty buffer"))
	}
	if offset == -1 {
		offset = addrOf(buf)
	}
	c.wlock.Lock()
	defer c.wlock.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opError("iomap", net.ErrClosed)
	}
	i := 0
	for i < len(c.ioMaps) && c.ioMaps[i] != nil {
		i++
	}
	if i == len(c.ioMaps) {
		return 0, c.opError("iomap", ErrNoIOMap)
	}
	mr, err := c.pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return 0, c.opError("iomap", err)
	}
	// rs_send_iomaps: the entry goes like data, under the same limits.
	if !c.canSend() {
		if err := c.wait(wantWrite, c.writeWake, &c.wdl); err != nil {
			mr.Dereg()
			return 0, c.opError("iomap", err)
		}
	}
	if c.state&stWritable == 0 {
		mr.Dereg()
		return 0, c.opError("iomap", c.writeErr())
	}
	c.ioMaps[i] = mr
	m := IOMap{Offset: uint64(offset), SGE: SGE{Addr: mr.Addr(), Key: mr.RKey(), Length: uint32(len(buf))}}
	var b [IOMapLen]byte
	m.Encode(b[:], c.peerOrder)
	msg := MakeMsg(OpIOMapSGL, uint32(i))
	c.wr = verbs.SendWR{
		Opcode: verbs.WRWriteWithImm, Flags: verbs.SendSignaled | verbs.SendInline,
		ID: uint64(msg), Imm: uint32(msg), InlineData: b[:],
		RemoteAddr: c.remoteIOMap.Addr + uint64(i)*IOMapLen, RKey: c.remoteIOMap.Key,
	}
	c.sseqNo++
	c.sqeAvail--
	c.sbufBytesAvail -= IOMapLen
	if err := c.post(); err != nil {
		return 0, c.opError("iomap", err)
	}
	return offset, nil
}

// IOUnmap releases a region IOMap registered (riounmap): the peer is not
// told, and a write it makes there afterwards fails its connection.
func (c *Conn) IOUnmap(buf []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, mr := range c.ioMaps {
		if mr != nil && len(buf) > 0 && len(mr.Buf()) == len(buf) && &mr.Buf()[0] == &buf[0] {
			c.ioMaps[i] = nil
			if err := mr.Dereg(); err != nil {
				return c.opError("iounmap", err)
			}
			return nil
		}
	}
	return c.opError("iounmap", fmt.Errorf("%w: buffer not mapped", ErrNotMapped))
}

// IOWrite writes p straight into the region the peer mapped at offset
// (riowrite): RDMA WRITEs with no immediate, so the peer's Read sees
// nothing of them. It returns how much it wrote; a short count with
// ErrNotMapped when p runs past the mapped regions.
func (c *Conn) IOWrite(p []byte, offset int64) (int, error) {
	c.wlock.Lock()
	defer c.wlock.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opError("iowrite", net.ErrClosed)
	}
	if c.wdl.expired() {
		return 0, c.opError("iowrite", errDeadline)
	}
	// The peer's table entry may be in a completion not yet taken.
	c.poll()
	n := 0
	olen := olapStart
	var iom *IOMap
	for n < len(p) {
		off := uint64(offset) + uint64(n)
		if iom == nil || off >= iom.Offset+uint64(iom.SGE.Length) {
			if iom = c.findIOMap(off); iom == nil {
				return n, c.opError("iowrite", ErrNotMapped)
			}
		}
		if !c.canSend() {
			if err := c.wait(wantWrite, c.writeWake, &c.wdl); err != nil {
				return n, c.opError("iowrite", err)
			}
		}
		if c.state&stWritable == 0 {
			return n, c.opError("iowrite", c.writeErr())
		}
		left := len(p) - n
		size := left
		if olen < left {
			size = olen
			if olen < maxTransfer {
				olen <<= 1
			}
		}
		size = min(size, c.sbufBytesAvail, int(iom.Offset+uint64(iom.SGE.Length)-off))
		c.fill(p[n:n+size], size, verbs.WRWrite)
		// rs_write_direct: no credit, no ring; the WR's ID says what
		// it holds of the send buffer.
		c.wr.RemoteAddr, c.wr.RKey = iom.SGE.Addr+off-iom.Offset, iom.SGE.Key
		c.sqeAvail--
		c.sbufBytesAvail -= size
		c.wr.ID = uint64(MakeMsg(opWrite, uint32(size)))
		if err := c.post(); err != nil {
			return n, c.opError("iowrite", err)
		}
		n += size
	}
	return n, nil
}

// findIOMap is rs_find_iomap.
func (c *Conn) findIOMap(off uint64) *IOMap {
	for i := range c.targetIOMap {
		m := &c.targetIOMap[i]
		if off >= m.Offset && off < m.Offset+uint64(m.SGE.Length) {
			return m
		}
	}
	return nil
}
