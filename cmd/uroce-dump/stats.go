package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/uroce/uroce/bth"
)

// stats is the --stats summary: counters for the whole input and per flow.
type stats struct {
	Frames    int `json:"frames"`     // every frame read
	RoCE      int `json:"roce"`       // RoCE packets that decoded
	Other     int `json:"other"`      // frames that are not RoCE
	Malformed int `json:"malformed"`  // frames to UDP 4791 that did not decode
	ICRCBad   int `json:"icrc_bad"`   // RoCE packets with a bad ICRC
	UDPCsBad  int `json:"udp_cs_bad"` // RoCE packets with a wrong, non-zero UDP checksum

	opcodes [256]int // RoCE packets by opcode

	flows map[flowKey]*flow
	order []*flow // in order of first packet
}

// flow counts one direction of a connection.
type flow struct {
	key      flowKey
	Packets  int `json:"packets"`
	Bytes    int `json:"bytes"`   // frame bytes on the wire
	Payload  int `json:"payload"` // RoCE payload bytes
	Requests int `json:"requests"`
	ACKs     int `json:"acks"`
	NAKs     int `json:"naks"`
	RNRNAKs  int `json:"rnr_naks"`
	Retrans  int `json:"retransmissions"`
	CNPs     int `json:"cnps"`
	CE       int `json:"ce"`
	ICRCBad  int `json:"icrc_bad"`

	nakCodes [32]int // NAKs by code

	// Retransmission tracking over request PSNs: the highest seen and a
	// bitmap of the last psnWindow PSNs seen, indexed by PSN modulo the
	// window.
	started bool
	maxPSN  bth.PSN
	seen    [psnWindow / 64]uint64
}

const psnWindow = 1024

func (s *stats) flow(k flowKey) *flow {
	if f, ok := s.flows[k]; ok {
		return f
	}
	if s.flows == nil {
		s.flows = map[flowKey]*flow{}
	}
	f := &flow{key: k}
	s.flows[k] = f
	s.order = append(s.order, f)
	return f
}

// add counts one decoded RoCE packet.
func (s *stats) add(k flowKey, pkt *bth.Packet, frameLen int, ce, icrcOK bool) {
	s.opcodes[pkt.Opcode()]++
	f := s.flow(k)
	f.Packets++
	f.Bytes += frameLen
	f.Payload += len(pkt.Payload())
	if ce {
		f.CE++
	}
	if !icrcOK {
		f.ICRCBad++
	}
	if pkt.Opcode() == bth.CNP {
		f.CNPs++
	}
	if pkt.Has(bth.Request) {
		f.Requests++
		if f.request(pkt.BTH().PSN()) {
			f.Retrans++
		}
	}
	// Only ACKNOWLEDGE and ATOMIC ACKNOWLEDGE are acknowledgements; a
	// READ response's AETH always says ACK.
	if a := pkt.AETH(); a != nil && !pkt.Has(bth.Read) {
		switch syn := a.Syndrome(); syn.Kind() {
		case bth.KindACK:
			f.ACKs++
		case bth.KindRNRNAK:
			f.RNRNAKs++
		case bth.KindNAK:
			f.NAKs++
			f.nakCodes[syn.NAKCode()]++
		}
	}
}

// request records a request PSN and reports whether it is a
// retransmission (see the package doc).
func (f *flow) request(p bth.PSN) bool {
	if !f.started {
		f.started, f.maxPSN = true, p
		f.mark(p)
		return false
	}
	d := p.Diff(f.maxPSN)
	switch {
	case d > 0:
		// The PSNs entering the window reuse the bits of those a window
		// ago.
		if d >= psnWindow {
			clear(f.seen[:])
		} else {
			for q := f.maxPSN.Next(); q != p; q = q.Next() {
				f.seen[q%psnWindow/64] &^= 1 << (q % 64)
			}
		}
		f.maxPSN = p
		f.mark(p)
		return false
	case -d >= psnWindow:
		return true
	case f.seen[p%psnWindow/64]&(1<<(p%64)) != 0:
		return true
	}
	f.mark(p)
	return false
}

func (f *flow) mark(p bth.PSN) { f.seen[p%psnWindow/64] |= 1 << (p % 64) }

// nakNames are short names of the NAK codes for the summary.
var nakNames = [...]string{"psn_seq", "inv_req", "rem_access", "rem_op", "inv_rd_req"}

func nakName(code int) string {
	if code < len(nakNames) {
		return nakNames[code]
	}
	return "code" + strconv.Itoa(code)
}

func (f *flow) nakSummary() string {
	var b strings.Builder
	for code, n := range f.nakCodes {
		if n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d", nakName(code), n)
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// write prints the summary as a table.
func (s *stats) write(w io.Writer, p *peers) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "src\t  dst\tqp\tpeer\tpackets\tbytes\tpayload\trequests\tacks\tnaks\trnr_naks\tretrans\tcnps\tce\ticrc_bad\t nak codes")
	for _, f := range s.order {
		peer := "-"
		if q, ok := p.peer[f.key]; ok {
			peer = "0x" + strconv.FormatUint(uint64(q), 16)
		}
		fmt.Fprintf(tw, "%v\t→ %v\t0x%x\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t %s\n",
			f.key.src, f.key.dst, f.key.qp, peer, f.Packets, f.Bytes, f.Payload, f.Requests,
			f.ACKs, f.NAKs, f.RNRNAKs, f.Retrans, f.CNPs, f.CE, f.ICRCBad, f.nakSummary())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for op, n := range s.opcodes {
		if n > 0 {
			fmt.Fprintf(w, "%8d %v\n", n, bth.Opcode(op))
		}
	}
	_, err := fmt.Fprintf(w, "frames %d, RoCE %d, other %d, malformed %d, ICRC bad %d, UDP checksum bad %d\n",
		s.Frames, s.RoCE, s.Other, s.Malformed, s.ICRCBad, s.UDPCsBad)
	return err
}

// jsonFlow is a flow in the --json summary.
type jsonFlow struct {
	Src      string         `json:"src"`
	Dst      string         `json:"dst"`
	QP       uint32         `json:"qp"`
	PeerQP   *uint32        `json:"peer_qp,omitempty"`
	NAKCodes map[string]int `json:"nak_codes,omitempty"`
	*flow
}

// writeJSON prints the summary as one JSON object on one line.
func (s *stats) writeJSON(w io.Writer, p *peers) error {
	flows := make([]jsonFlow, 0, len(s.order))
	for _, f := range s.order {
		jf := jsonFlow{Src: f.key.src.String(), Dst: f.key.dst.String(), QP: f.key.qp, flow: f}
		if q, ok := p.peer[f.key]; ok {
			jf.PeerQP = &q
		}
		for code, n := range f.nakCodes {
			if n > 0 {
				if jf.NAKCodes == nil {
					jf.NAKCodes = map[string]int{}
				}
				jf.NAKCodes[nakName(code)] = n
			}
		}
		flows = append(flows, jf)
	}
	ops := map[string]int{}
	for op, n := range s.opcodes {
		if n > 0 {
			ops[bth.Opcode(op).String()] = n
		}
	}
	b, err := json.Marshal(struct {
		Stats   *stats         `json:"stats"`
		Opcodes map[string]int `json:"opcodes"`
		Flows   []jsonFlow     `json:"flows"`
	}{s, ops, flows})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
