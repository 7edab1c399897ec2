package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// LinkTypeEthernet is the pcap link type of Ethernet frames.
const LinkTypeEthernet = 1

// ErrFormat means the bytes are not a pcap file this package reads.
var ErrFormat = errors.New("not a pcap file")

// Record is one captured frame.
type Record struct {
	Time time.Time
	// Data is the captured bytes; OrigLen the frame's length on the wire.
	Data    []byte
	OrigLen int
}

// File is a parsed pcap file.
type File struct {
	LinkType uint32
	Records  []Record
}

// ReadFile reads a whole pcap file (microsecond or nanosecond, either
// byte order).
func ReadFile(name string) (*File, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// Parse parses the bytes of a pcap file.
func Parse(b []byte) (*File, error) {
	if len(b) < 24 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFormat, len(b))
	}
	var bo binary.ByteOrder
	nano := false
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4:
		bo = binary.LittleEndian
	case 0xa1b23c4d:
		bo, nano = binary.LittleEndian, true
	case 0xd4c3b2a1:
		bo = binary.BigEndian
	case 0x4d3cb2a1:
		bo, nano = binary.BigEndian, true
	default:
		return nil, fmt.Errorf("%w: magic 0x%08x", ErrFormat, binary.LittleEndian.Uint32(b))
	}
	f := &File{LinkType: bo.Uint32(b[20:]) & 0x0fffffff}
	for off := 24; off < len(b); {
		if len(b)-off < 16 {
			return nil, fmt.Errorf("%w: record header truncated at %d", ErrFormat, off)
		}
		sec, frac := bo.Uint32(b[off:]), bo.Uint32(b[off+4:])
		incl, orig := int(bo.Uint32(b[off+8:])), int(bo.Uint32(b[off+12:]))
		off += 16
		if incl > len(b)-off {
			return nil, fmt.Errorf("%w: record of %d bytes truncated at %d", ErrFormat, incl, off)
		}
		ns := int64(frac)
		if !nano {
			ns *= 1000
		}
		f.Records = append(f.Records, Record{
			Time: time.Unix(int64(sec), ns).UTC(), Data: b[off : off+incl : off+incl], OrigLen: orig,
		})
		off += incl
	}
	return f, nil
}

// Writer writes a microsecond pcap file.
type Writer struct {
	w io.Writer
}

// NewWriter writes the file header and returns a Writer.
func NewWriter(w io.Writer, linkType uint32, snaplen uint32) (*Writer, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], snaplen)
	binary.LittleEndian.PutUint32(h[20:], linkType)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// Write appends one record.
func (w *Writer) Write(t time.Time, data []byte) error {
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(t.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(t.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(data)))
	if _, err := w.w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}
