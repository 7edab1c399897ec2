package main

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/google/gopacket"

	"github.com/uroce/uroce/bth"
)

// The printers append to a reused buffer with strconv, so that a packet
// line costs no allocation (the text of a malformed packet's error is the
// exception).

// appendHead appends the frame number and the relative time.
func (d *dumper) appendHead(b []byte, ci gopacket.CaptureInfo) []byte {
	b = appendPadded(b, int64(d.stats.Frames), 5)
	b = append(b, ' ')
	var tmp [24]byte
	t := d.appendRelTime(tmp[:0], ci.Timestamp)
	for range 11 - len(t) {
		b = append(b, ' ')
	}
	return append(b, t...)
}

func appendPadded(b []byte, v int64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], v, 10)
	for range width - len(s) {
		b = append(b, ' ')
	}
	return append(b, s...)
}

func appendAddrs(b []byte, src, dst netip.Addr) []byte {
	b = appendAddr(b, src)
	b = append(b, " → "...)
	return appendAddr(b, dst)
}

func appendAddr(b []byte, a netip.Addr) []byte {
	if !a.IsValid() {
		return append(b, '?')
	}
	return a.AppendTo(b)
}

func appendHex(b []byte, v uint64) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

func appendKV(b []byte, key string, v uint64, hex bool) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	if hex {
		return appendHex(b, v)
	}
	return strconv.AppendUint(b, v, 10)
}

// appendText appends the text line of the decoded packet in d.frame; want
// is its correct ICRC.
func (d *dumper) appendText(b []byte, ci gopacket.CaptureInfo, want uint32, udpOK bool) []byte {
	f := &d.frame
	h := f.BTH()
	b = d.appendHead(b, ci)
	b = append(b, ' ')
	src, dst := ipAddrs(f)
	b = appendAddrs(b, src, dst)
	b = append(b, ' ')
	b = append(b, f.Opcode().String()...)
	b = appendKV(b, "qp", uint64(h.DestQP()), true)
	b = appendKV(b, "psn", uint64(h.PSN()), false)
	if k := h.PKey(); k != 0xffff {
		b = appendKV(b, "pkey", uint64(k), true)
	}
	for _, fl := range [...]struct {
		on   bool
		name string
	}{{h.AckReq(), " ackreq"}, {h.SE(), " se"}, {h.FECN(), " fecn"}, {h.BECN(), " becn"}, {ecnOf(f) == ecnCE, " ce"}} {
		if fl.on {
			b = append(b, fl.name...)
		}
	}
	p := &f.Packet
	if x := p.RDETH(); x != nil {
		b = append(b, " RDETH"...)
		b = appendKV(b, "ee", uint64(x.EECnxt()), true)
	}
	if x := p.DETH(); x != nil {
		b = append(b, " DETH"...)
		b = appendKV(b, "qkey", uint64(x.QKey()), true)
		b = appendKV(b, "srcqp", uint64(x.SrcQP()), true)
	}
	if x := p.RETH(); x != nil {
		b = append(b, " RETH"...)
		b = appendKV(b, "va", x.VA(), true)
		b = appendKV(b, "rkey", uint64(x.RKey()), true)
		b = appendKV(b, "len", uint64(x.DMALen()), false)
	}
	if x := p.AtomicETH(); x != nil {
		b = append(b, " AtomicETH"...)
		b = appendKV(b, "va", x.VA(), true)
		b = appendKV(b, "rkey", uint64(x.RKey()), true)
		if p.Opcode()&0x1f == bth.RCFetchAdd {
			b = appendKV(b, "add", x.SwapAdd(), false)
		} else {
			b = appendKV(b, "swap", x.SwapAdd(), true)
			b = appendKV(b, "compare", x.Compare(), true)
		}
	}
	if x := p.FETH(); x != nil {
		b = append(b, " FETH"...)
		b = appendKV(b, "plt", uint64(x.PlacementType()), false)
		b = appendKV(b, "sel", uint64(x.Selectivity()), false)
	}
	if x := p.ImmDt(); x != nil {
		b = append(b, " ImmDt"...)
		b = appendKV(b, "imm", uint64(x.Imm()), true)
	}
	if x := p.IETH(); x != nil {
		b = append(b, " IETH"...)
		b = appendKV(b, "rkey", uint64(x.RKey()), true)
	}
	if x := p.AETH(); x != nil {
		b = append(b, " AETH "...)
		b = appendSyndrome(b, x.Syndrome())
		b = appendKV(b, "msn", uint64(x.MSN()), false)
	}
	if x := p.AtomicAckETH(); x != nil {
		b = append(b, " AtomicAckETH"...)
		b = appendKV(b, "orig", x.OrigData(), true)
	}
	b = appendKV(b, "payload", uint64(p.PayloadLen()), false)
	if n := p.PadCnt(); n > 0 {
		b = appendKV(b, "pad", uint64(n), false)
	}
	if have := p.ICRC(); have == want {
		b = append(b, " icrc=ok"...)
	} else {
		b = append(b, " icrc=BAD (have "...)
		b = appendHex(b, uint64(have))
		b = append(b, ", want "...)
		b = appendHex(b, uint64(want))
		b = append(b, ')')
	}
	if !udpOK {
		b = append(b, " udp_checksum=BAD"...)
	}
	return append(b, '\n')
}

// appendSyndrome appends an AETH syndrome decoded.
func appendSyndrome(b []byte, s bth.Syndrome) []byte {
	switch s.Kind() {
	case bth.KindACK:
		b = append(b, "ACK"...)
		return appendKV(b, "credits", uint64(s.Credits()), false)
	case bth.KindRNRNAK:
		b = append(b, "RNR_NAK"...)
		b = appendKV(b, "timer", uint64(s.RNRTimer()), false)
		b = append(b, " ("...)
		b = strconv.AppendFloat(b, bth.RNRTimeout(s.RNRTimer())/1000, 'f', -1, 64)
		return append(b, " ms)"...)
	case bth.KindNAK:
		b = append(b, "NAK"...)
		b = appendKV(b, "code", uint64(s.NAKCode()), false)
		b = append(b, " ("...)
		b = append(b, s.NAKCode().String()...)
		return append(b, ')')
	}
	b = append(b, "reserved"...)
	return appendKV(b, "syndrome", uint64(s), true)
}

// appendMalformed appends the line of a frame to UDP port 4791 that did
// not decode.
func (d *dumper) appendMalformed(b []byte, data []byte, ci gopacket.CaptureInfo, err error) []byte {
	src, dst := rawAddrs(d.link, data)
	if d.opt.json {
		b = d.appendJSONHead(b, ci, src, dst)
		b = append(b, `,"malformed":`...)
		b = appendJSONString(b, err.Error())
		return append(b, "}\n"...)
	}
	b = d.appendHead(b, ci)
	b = append(b, ' ')
	b = appendAddrs(b, src, dst)
	b = append(b, " MALFORMED "...)
	b = append(b, err.Error()...)
	return append(b, '\n')
}

// JSON, written by hand for the same reason as the text.

func (d *dumper) appendJSONHead(b []byte, ci gopacket.CaptureInfo, src, dst netip.Addr) []byte {
	b = append(b, `{"frame":`...)
	b = strconv.AppendInt(b, int64(d.stats.Frames), 10)
	b = append(b, `,"time":`...)
	b = d.appendRelTime(b, ci.Timestamp)
	b = append(b, `,"ts":"`...)
	b = ci.Timestamp.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","src":"`...)
	b = appendAddr(b, src)
	b = append(b, `","dst":"`...)
	b = appendAddr(b, dst)
	return append(b, '"')
}

func appendJSONKey(b []byte, key string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendJSONUint(b []byte, key string, v uint64) []byte {
	return strconv.AppendUint(appendJSONKey(b, key), v, 10)
}

// appendJSONHex writes 64-bit values as hex strings: JSON numbers lose
// precision above 2^53 in most readers.
func appendJSONHex(b []byte, key string, v uint64) []byte {
	b = append(appendJSONKey(b, key), '"')
	return append(appendHex(b, v), '"')
}

func appendJSONBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendJSONKey(b, key), v)
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendJSON appends the JSON object of the decoded packet in d.frame.
func (d *dumper) appendJSON(b []byte, ci gopacket.CaptureInfo, want uint32, udpOK bool) []byte {
	f := &d.frame
	h := f.BTH()
	p := &f.Packet
	src, dst := ipAddrs(f)
	b = d.appendJSONHead(b, ci, src, dst)
	b = appendJSONUint(b, "sport", uint64(f.UDP().SrcPort()))
	b = appendJSONUint(b, "ecn", uint64(ecnOf(f)))
	b = append(appendJSONKey(b, "opcode"), '"')
	b = append(append(b, p.Opcode().String()...), '"')
	b = appendJSONUint(b, "opcode_num", uint64(p.Opcode()))
	b = appendJSONUint(b, "qp", uint64(h.DestQP()))
	b = appendJSONUint(b, "psn", uint64(h.PSN()))
	b = appendJSONUint(b, "pkey", uint64(h.PKey()))
	b = appendJSONBool(b, "ackreq", h.AckReq())
	b = appendJSONBool(b, "se", h.SE())
	b = appendJSONBool(b, "fecn", h.FECN())
	b = appendJSONBool(b, "becn", h.BECN())
	if x := p.RDETH(); x != nil {
		b = appendJSONUint(b, "rdeth_ee", uint64(x.EECnxt()))
	}
	if x := p.DETH(); x != nil {
		b = append(appendJSONKey(b, "deth"), '{')
		b = strconv.AppendUint(append(b, `"qkey":`...), uint64(x.QKey()), 10)
		b = appendJSONUint(b, "src_qp", uint64(x.SrcQP()))
		b = append(b, '}')
	}
	if x := p.RETH(); x != nil {
		b = append(appendJSONKey(b, "reth"), '{')
		b = append(b, `"va":"`...)
		b = append(appendHex(b, x.VA()), '"')
		b = appendJSONUint(b, "rkey", uint64(x.RKey()))
		b = appendJSONUint(b, "len", uint64(x.DMALen()))
		b = append(b, '}')
	}
	if x := p.AtomicETH(); x != nil {
		b = append(appendJSONKey(b, "atomic_eth"), '{')
		b = append(b, `"va":"`...)
		b = append(appendHex(b, x.VA()), '"')
		b = appendJSONUint(b, "rkey", uint64(x.RKey()))
		b = appendJSONHex(b, "swap_add", x.SwapAdd())
		b = appendJSONHex(b, "compare", x.Compare())
		b = append(b, '}')
	}
	if x := p.FETH(); x != nil {
		b = append(appendJSONKey(b, "feth"), '{')
		b = strconv.AppendUint(append(b, `"placement_type":`...), uint64(x.PlacementType()), 10)
		b = appendJSONUint(b, "selectivity", uint64(x.Selectivity()))
		b = append(b, '}')
	}
	if x := p.ImmDt(); x != nil {
		b = appendJSONUint(b, "imm", uint64(x.Imm()))
	}
	if x := p.IETH(); x != nil {
		b = appendJSONUint(b, "ieth_rkey", uint64(x.RKey()))
	}
	if x := p.AETH(); x != nil {
		s := x.Syndrome()
		b = append(appendJSONKey(b, "aeth"), '{')
		b = strconv.AppendUint(append(b, `"syndrome":`...), uint64(s), 10)
		b = append(b, `,"kind":"`...)
		switch s.Kind() {
		case bth.KindACK:
			b = append(b, `ACK"`...)
			b = appendJSONUint(b, "credits", uint64(s.Credits()))
		case bth.KindRNRNAK:
			b = append(b, `RNR_NAK"`...)
			b = appendJSONUint(b, "rnr_timer", uint64(s.RNRTimer()))
			b = strconv.AppendFloat(appendJSONKey(b, "rnr_timeout_us"), bth.RNRTimeout(s.RNRTimer()), 'f', -1, 64)
		case bth.KindNAK:
			b = append(b, `NAK"`...)
			b = appendJSONUint(b, "nak_code", uint64(s.NAKCode()))
			b = appendJSONString(appendJSONKey(b, "nak"), s.NAKCode().String())
		default:
			b = append(b, `reserved"`...)
		}
		b = appendJSONUint(b, "msn", uint64(x.MSN()))
		b = append(b, '}')
	}
	if x := p.AtomicAckETH(); x != nil {
		b = appendJSONHex(b, "atomic_orig", x.OrigData())
	}
	b = appendJSONUint(b, "payload", uint64(p.PayloadLen()))
	b = appendJSONUint(b, "pad", uint64(p.PadCnt()))
	b = appendJSONBool(b, "icrc_ok", p.ICRC() == want)
	b = appendJSONBool(b, "udp_checksum_ok", udpOK)
	return append(b, "}\n"...)
}
