package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"
)

var (
	errEmptyFile  = errors.New("empty file")
	errNotCapture = errors.New("not a pcap or pcapng file")
)

// ngSectionHeader is the pcapng section header block's type, the first
// word of every pcapng file. It reads the same in either byte order.
const ngSectionHeader = 0x0a0d0d0a

// captureMagics are the bytes a file openCapture reads starts with: pcap
// in microseconds and in nanoseconds, each byte order; pcapng; gzip, which
// pcapgo unpacks and reads as pcap.
var captureMagics = []struct {
	magic []byte
	kind  string
}{
	{[]byte{0xd4, 0xc3, 0xb2, 0xa1}, "pcap"},
	{[]byte{0xa1, 0xb2, 0xc3, 0xd4}, "pcap"},
	{[]byte{0x4d, 0x3c, 0xb2, 0xa1}, "pcap"},
	{[]byte{0xa1, 0xb2, 0x3c, 0x4d}, "pcap"},
	{[]byte{0x0a, 0x0d, 0x0d, 0x0a}, "pcapng"},
	{[]byte{0x1f, 0x8b}, "pcap"},
}

// captureKind says which capture format a file starting with head is,
// and whether head holds all of the magic number; "" when none.
func captureKind(head []byte) (kind string, whole bool) {
	for _, m := range captureMagics {
		n := min(len(head), len(m.magic))
		if bytes.Equal(head[:n], m.magic[:n]) {
			return m.kind, n == len(m.magic)
		}
	}
	return "", false
}

// openCapture returns a reader for a pcap or pcapng file, told by its
// magic number. Its errors, and those of the reader it returns, start
// with the file's name and say "truncated" when the file ends inside a
// header or a record, where pcapgo says only EOF.
func openCapture(name string, r io.Reader) (packetSource, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(4)
	if len(head) == 0 {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: %w", name, errEmptyFile)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	kind, whole := captureKind(head)
	if kind == "" {
		return nil, fmt.Errorf("%s: %w", name, errNotCapture)
	}
	if !whole {
		return nil, truncated(name, kind, "in the file header")
	}
	src := &fileSource{name: name, kind: kind}
	var headerErr error
	if kind == "pcapng" {
		fr := &ngFramer{r: br}
		src.ng = fr
		src.packetSource, headerErr = pcapgo.NewNgReader(fr, pcapgo.DefaultNgReaderOptions)
		if headerErr == io.EOF && !fr.midBlock() {
			// A section header and nothing after it: the reader wants
			// an interface to take the link type from.
			return nil, fmt.Errorf("%s: pcapng without an interface description block", name)
		}
	} else {
		src.packetSource, headerErr = pcapgo.NewReader(br)
	}
	if headerErr == io.EOF || headerErr == io.ErrUnexpectedEOF {
		return nil, truncated(name, kind, "in the file header")
	}
	if headerErr != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, kind, headerErr)
	}
	if err := checkLink(src.LinkType()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return src, nil
}

func truncated(name, kind, where string) error {
	return fmt.Errorf("%s: truncated %s: %s", name, kind, where)
}

// fileSource reads a capture file and tells a file cut short from one
// that ends cleanly.
type fileSource struct {
	packetSource
	name, kind string
	ng         *ngFramer // pcapng: its block framing; nil for pcap
	packets    int
}

func (s *fileSource) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	data, ci, err := s.packetSource.ZeroCopyReadPacketData()
	if err == nil {
		s.packets++
		return data, ci, nil
	}
	// Both readers return a capture length only once a record's header
	// was read whole, so io.EOF with one is a record cut short. pcap
	// reads its record header with io.ReadFull, which says
	// io.ErrUnexpectedEOF when the header is cut; pcapng says io.EOF
	// wherever the file ends, so its framing tells.
	clean := err == io.EOF && ci.CaptureLength == 0 && (s.ng == nil || !s.ng.midBlock())
	if clean {
		return nil, ci, io.EOF
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, ci, truncated(s.name, s.kind, "cut short "+s.where())
	}
	return nil, ci, fmt.Errorf("%s: %s: %w", s.name, s.where(), err)
}

// where says where in the file reading stopped, for errors.
func (s *fileSource) where() string {
	if s.packets == 0 {
		return "before the first packet"
	}
	return fmt.Sprintf("after packet %d", s.packets)
}

// ngFramer passes a pcapng file through and follows its block framing
// (each block: type, total length, body, total length again; a section
// header block then gives the byte order of the lengths that follow), so
// that the file can be told to end between blocks or inside one.
type ngFramer struct {
	r    io.Reader
	hdr  [12]byte // type, total length and, in a section header, byte-order magic
	nhdr int      // bytes of hdr read
	left int64    // bytes of the current block still to come after hdr
	big  bool     // the section's byte order
}

func (f *ngFramer) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	for b := p[:n]; len(b) > 0; {
		if f.left > 0 {
			k := min(int64(len(b)), f.left)
			f.left -= k
			b = b[k:]
			continue
		}
		hl := f.headerLen()
		k := copy(f.hdr[f.nhdr:hl], b)
		f.nhdr += k
		b = b[k:]
		if f.nhdr == f.headerLen() {
			f.startBlock()
		}
	}
	return n, err
}

// headerLen is the length of the current block's leading fields: 12 for a
// section header, whose byte-order magic says how to read its length.
func (f *ngFramer) headerLen() int {
	if f.nhdr >= 4 && binary.LittleEndian.Uint32(f.hdr[:4]) == ngSectionHeader {
		return 12
	}
	return 8
}

func (f *ngFramer) startBlock() {
	hl := f.headerLen()
	if hl == 12 {
		f.big = binary.BigEndian.Uint32(f.hdr[8:]) == 0x1a2b3c4d
	}
	var order binary.ByteOrder = binary.LittleEndian
	if f.big {
		order = binary.BigEndian
	}
	// A length shorter than the header is corrupt; the reader says so.
	f.left = max(int64(order.Uint32(f.hdr[4:8]))-int64(hl), 0)
	f.nhdr = 0
}

// midBlock says whether the bytes read so far end inside a block.
func (f *ngFramer) midBlock() bool { return f.nhdr > 0 || f.left > 0 }
