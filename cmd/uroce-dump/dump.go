package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/uroce/uroce/bth"
)

// options are the dumper's settings, from the command line.
type options struct {
	qp      uint32
	hasQP   bool
	classes class // 0: every class
	stats   bool
	quiet   bool
	json    bool
	count   int // stop after this many packets shown; 0: never
}

func (o *options) filtered() bool { return o.hasQP || o.classes != 0 }

// errUnsupportedLink means the capture's link type is not one the dumper
// decodes.
var errUnsupportedLink = errors.New("unsupported link type")

// errCountReached stops reading once -c packets have been shown.
var errCountReached = errors.New("packet count reached")

// packetSource is what the dumper reads frames from: a pcap or pcapng
// reader, or a live capture.
type packetSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	LinkType() layers.LinkType
}

// dumper decodes frames and prints RoCE packets. One dumper handles one
// input; it reuses its decoder and line buffer for every frame.
type dumper struct {
	opt   options
	out   *bufio.Writer
	link  layers.LinkType
	pcapw *pcapgo.Writer // -w, or nil
	line  []byte
	first time.Time
	shown int

	frame bth.Frame
	peers *peers
	stats stats
}

func newDumper(w io.Writer, opt options) *dumper {
	return &dumper{opt: opt, out: bufio.NewWriterSize(w, 64<<10), peers: newPeers(), line: make([]byte, 0, 512)}
}

// checkLink says whether the dumper decodes this link type.
func checkLink(lt layers.LinkType) error {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6,
		layers.LinkTypeLinuxSLL:
		return nil
	}
	return fmt.Errorf("%w %d (%v)", errUnsupportedLink, lt, lt)
}

// decode decodes a frame of the input's link type into d.frame.
func (d *dumper) decode(b []byte) error {
	switch d.link {
	case layers.LinkTypeEthernet:
		return d.frame.Decode(b)
	case layers.LinkTypeLinuxSLL:
		ip, err := cookedIP(b)
		if err != nil {
			return err
		}
		return d.frame.DecodeIP(ip)
	}
	return d.frame.DecodeIP(b)
}

var (
	errCookedTruncated = fmt.Errorf("linux cooked header: %w", bth.ErrTruncated)
	errCookedNotIP     = fmt.Errorf("linux cooked header: %w: not IP", bth.ErrNotRoCE)
)

// cookedIP returns the IP datagram of a Linux cooked (SLL) frame: a
// 16-byte header ending with the EtherType. (SLL2, link type 276, does not
// fit gopacket v1.1.19's 8-bit LinkType.)
func cookedIP(b []byte) ([]byte, error) {
	const n, at = 16, 14
	if len(b) < n {
		return nil, errCookedTruncated
	}
	if p := binary.BigEndian.Uint16(b[at:]); p != bth.EtherTypeIPv4 && p != bth.EtherTypeIPv6 {
		return nil, errCookedNotIP
	}
	return b[n:], nil
}

// run reads every frame of src and handles it.
func (d *dumper) run(src packetSource) error {
	d.link = src.LinkType()
	if err := checkLink(d.link); err != nil {
		return err
	}
	for {
		data, ci, err := src.ZeroCopyReadPacketData()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := d.handle(data, ci); err != nil {
			if errors.Is(err, errCountReached) {
				return nil
			}
			return err
		}
	}
}

// handle decodes, counts and prints one frame.
func (d *dumper) handle(data []byte, ci gopacket.CaptureInfo) error {
	if d.stats.Frames == 0 {
		d.first = ci.Timestamp
	}
	d.stats.Frames++
	err := d.decode(data)
	if err != nil {
		if errors.Is(err, bth.ErrNotRoCE) || !toRoCEPort(d.link, data) {
			d.stats.Other++
			if !d.opt.filtered() {
				return d.write(data, ci)
			}
			return nil
		}
		d.stats.Malformed++
		if d.opt.filtered() {
			return nil
		}
		d.line = d.appendMalformed(d.line[:0], data, ci, err)
		return d.emit(data, ci)
	}

	f := &d.frame
	k := flowKey{qp: f.BTH().DestQP()}
	k.src, k.dst = ipAddrs(f)
	d.peers.learn(k, &f.Packet)
	if !d.match(k) {
		return nil
	}
	want, _ := bth.ICRC(f.Datagram()) // Decode checked every length ICRC needs
	icrcOK := want == f.ICRC()
	udpOK := f.UDPChecksumValid()
	ce := ecnOf(f) == ecnCE
	d.stats.RoCE++
	if !icrcOK {
		d.stats.ICRCBad++
	}
	if !udpOK {
		d.stats.UDPCsBad++
	}
	if d.opt.stats {
		d.stats.add(k, &f.Packet, len(data), ce, icrcOK)
	}
	if d.opt.json {
		d.line = d.appendJSON(d.line[:0], ci, want, udpOK)
	} else {
		d.line = d.appendText(d.line[:0], ci, want, udpOK)
	}
	return d.emit(data, ci)
}

// match applies --qp and --class to a decoded packet.
func (d *dumper) match(k flowKey) bool {
	if d.opt.hasQP && !d.peers.matchQP(k, d.opt.qp) {
		return false
	}
	return d.opt.classes == 0 || classOf(d.frame.Opcode())&d.opt.classes != 0
}

// emit prints the line built in d.line (unless -q), writes the frame to
// -w, and counts it against -c.
func (d *dumper) emit(data []byte, ci gopacket.CaptureInfo) error {
	if !d.opt.quiet {
		if _, err := d.out.Write(d.line); err != nil {
			return err
		}
	}
	if err := d.write(data, ci); err != nil {
		return err
	}
	d.shown++
	if d.opt.count > 0 && d.shown >= d.opt.count {
		return errCountReached
	}
	return nil
}

func (d *dumper) write(data []byte, ci gopacket.CaptureInfo) error {
	if d.pcapw == nil {
		return nil
	}
	ci.CaptureLength = len(data)
	if ci.Length < len(data) {
		ci.Length = len(data)
	}
	if err := d.pcapw.WritePacket(ci, data); err != nil {
		return fmt.Errorf("write capture: %w", err)
	}
	return nil
}

// finish prints the summary, when asked for, and flushes the output.
func (d *dumper) finish() error {
	if d.opt.stats {
		if err := d.out.Flush(); err != nil {
			return err
		}
		var err error
		if d.opt.json {
			err = d.stats.writeJSON(d.out, d.peers)
		} else {
			if !d.opt.quiet && d.shown > 0 {
				d.out.WriteByte('\n')
			}
			err = d.stats.write(d.out, d.peers)
		}
		if err != nil {
			return err
		}
	}
	return d.out.Flush()
}

// learnPeers runs a first pass over src that only learns QP pairs, so that
// --qp matches the reverse direction from the first packet of a file.
func (d *dumper) learnPeers(src packetSource) error {
	d.link = src.LinkType()
	if err := checkLink(d.link); err != nil {
		return err
	}
	for {
		data, _, err := src.ZeroCopyReadPacketData()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if d.decode(data) == nil {
			f := &d.frame
			k := flowKey{qp: f.BTH().DestQP()}
			k.src, k.dst = ipAddrs(f)
			d.peers.learn(k, &f.Packet)
		}
	}
}

// dump is the dumper's core as the tests drive it: it prints every frame
// of a capture file to w under opt, then the summary when asked for, and
// returns the dumper for its counters.
func dump(w io.Writer, name string, r io.ReadSeeker, opt options) (*dumper, error) {
	d := newDumper(w, opt)
	if opt.hasQP {
		src, err := openCapture(name, r)
		if err != nil {
			return nil, err
		}
		if err := d.learnPeers(src); err != nil {
			return nil, err
		}
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
	}
	src, err := openCapture(name, r)
	if err != nil {
		return nil, err
	}
	err = d.run(src)
	if ferr := d.finish(); err == nil {
		err = ferr
	}
	return d, err
}

// ipOf returns the IP part of a frame of link type lt, or nil when the
// frame is not IP.
func ipOf(lt layers.LinkType, b []byte) []byte {
	switch lt {
	case layers.LinkTypeEthernet:
		if len(b) < bth.EthernetLen {
			return nil
		}
		et := bth.Ethernet(b).EtherType()
		b = b[bth.EthernetLen:]
		if et == bth.EtherTypeVLAN {
			if len(b) < bth.VLANLen {
				return nil
			}
			et = bth.VLAN(b).EtherType()
			b = b[bth.VLANLen:]
		}
		if et != bth.EtherTypeIPv4 && et != bth.EtherTypeIPv6 {
			return nil
		}
	case layers.LinkTypeLinuxSLL:
		ip, err := cookedIP(b)
		if err != nil {
			return nil
		}
		b = ip
	}
	if len(b) < 1 {
		return nil
	}
	return b
}

// toRoCEPort reports whether a frame that bth could not decode was meant
// for RoCE: it is IP and UDP to port 4791, or too short to tell after
// saying UDP. Such frames print as malformed; other frames (TCP with a bad
// header, say) are not RoCE's business.
func toRoCEPort(lt layers.LinkType, b []byte) bool {
	b = ipOf(lt, b)
	if b == nil {
		return false
	}
	// The headers may be cut anywhere: each field is read only when the
	// bytes up to its end are there (protocol, next header, port).
	var udp []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 10 || bth.IPv4(b).Protocol() != bth.ProtocolUDP {
			return false
		}
		if hl := bth.IPv4(b).HeaderLen(); hl >= bth.IPv4MinLen && len(b) >= hl {
			udp = b[hl:]
		}
	case 6:
		if len(b) < 7 || bth.IPv6(b).NextHeader() != bth.ProtocolUDP {
			return false
		}
		if len(b) >= bth.IPv6Len {
			udp = b[bth.IPv6Len:]
		}
	default:
		return false
	}
	return len(udp) < 4 || bth.UDP(udp).DstPort() == bth.RoCEPort
}

// rawAddrs reads the IP addresses of a frame that did not decode, when
// the bytes hold them.
func rawAddrs(lt layers.LinkType, b []byte) (src, dst netip.Addr) {
	b = ipOf(lt, b)
	switch {
	case b == nil:
	case b[0]>>4 == 4 && len(b) >= bth.IPv4MinLen:
		src, dst = bth.IPv4(b).Src(), bth.IPv4(b).Dst()
	case b[0]>>4 == 6 && len(b) >= bth.IPv6Len:
		src, dst = bth.IPv6(b).Src(), bth.IPv6(b).Dst()
	}
	return src, dst
}

// ecnCE is the IP ECN codepoint Congestion Experienced.
const ecnCE = 3

// ipAddrs returns the addresses of a decoded frame.
func ipAddrs(f *bth.Frame) (src, dst netip.Addr) {
	if h := f.IPv4(); h != nil {
		return h.Src(), h.Dst()
	}
	h := f.IPv6()
	return h.Src(), h.Dst()
}

// ecnOf returns the ECN bits of a decoded frame's IP header.
func ecnOf(f *bth.Frame) uint8 {
	if h := f.IPv4(); h != nil {
		return h.TOS() & 3
	}
	return f.IPv6().TrafficClass() & 3
}

// appendRelTime appends the time since the first frame, in seconds with
// microseconds.
func (d *dumper) appendRelTime(b []byte, t time.Time) []byte {
	rel := t.Sub(d.first)
	if rel < 0 {
		b = append(b, '-')
		rel = -rel
	}
	us := rel.Microseconds()
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	frac := us % 1e6
	for div := int64(1e5); div > 0; div /= 10 {
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}
