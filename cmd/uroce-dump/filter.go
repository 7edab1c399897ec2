package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/uroce/uroce/bth"
)

// class is a set of operation classes for --class.
type class uint8

const (
	classSend class = 1 << iota
	classWrite
	classRead
	classAtomic
	classAck
	classCNP
	classUD
	classFlush
)

var classNames = []struct {
	name string
	c    class
}{
	{"send", classSend}, {"write", classWrite}, {"read", classRead}, {"atomic", classAtomic},
	{"ack", classAck}, {"cnp", classCNP}, {"ud", classUD}, {"flush", classFlush},
}

var errBadClass = errors.New("unknown class")

// parseClasses parses a comma-separated list of class names.
func parseClasses(s string) (class, error) {
	var c class
	for name := range strings.SplitSeq(s, ",") {
		found := false
		for _, n := range classNames {
			if n.name == strings.TrimSpace(name) {
				c |= n.c
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("--class: %w %q (want send, write, read, atomic, ack, cnp, ud or flush)", errBadClass, name)
		}
	}
	return c, nil
}

// classOf returns the classes an opcode belongs to.
func classOf(o bth.Opcode) class {
	info := o.Info()
	if info == nil {
		return 0
	}
	var c class
	m := info.Mask
	if m&bth.Send != 0 {
		c |= classSend
	}
	if m&bth.Write != 0 {
		c |= classWrite
	}
	if m&bth.Read != 0 {
		c |= classRead
	}
	if m&(bth.Atomic|bth.AtomicWrite) != 0 {
		c |= classAtomic
	}
	if m&bth.Flush != 0 {
		c |= classFlush
	}
	// ACKs are the responses that carry no READ data: ACKNOWLEDGE and
	// ATOMIC ACKNOWLEDGE.
	if m&bth.Response != 0 && m&bth.Read == 0 {
		c |= classAck
	}
	if o == bth.CNP {
		c |= classCNP
	}
	if o.Service() == bth.ServiceUD {
		c |= classUD
	}
	return c
}

// flowKey names one direction of a connection: source and destination
// IP and the destination QP.
type flowKey struct {
	src, dst netip.Addr
	qp       uint32
}

// reverse returns the other direction, to the given QP.
func (k flowKey) reverse(qp uint32) flowKey { return flowKey{k.dst, k.src, qp} }

// peers learns which QPs are the two ends of a connection (see the
// package doc). Requests wait in a small direct-mapped table keyed by
// addresses and PSN until a response with the same PSN comes back; a
// collision just forgets the older request, which a later one replaces.
// Nothing allocates per packet; the map grows once per learnt pair.
type peers struct {
	pending [pendingSize]pendingReq
	peer    map[flowKey]uint32 // a flow's destination QP's peer QP
}

const pendingSize = 256

type pendingReq struct {
	key flowKey // the request's flow
	psn bth.PSN
	ok  bool
}

func newPeers() *peers { return &peers{peer: map[flowKey]uint32{}} }

func pendingSlot(src, dst netip.Addr, psn bth.PSN) int {
	a, b := src.As16(), dst.As16()
	h := uint32(psn) * 0x9e3779b1
	h ^= uint32(a[12])<<24 | uint32(a[13])<<16 | uint32(a[14])<<8 | uint32(a[15])
	h *= 0x85ebca6b
	h ^= uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])
	h *= 0xc2b2ae35
	return int(h>>24) % pendingSize
}

// learn looks at one decoded packet of flow k.
func (p *peers) learn(k flowKey, pkt *bth.Packet) {
	if d := pkt.DETH(); d != nil {
		p.pair(k, d.SrcQP())
		return
	}
	psn := pkt.BTH().PSN()
	switch {
	case pkt.Has(bth.Request):
		if _, ok := p.peer[k]; ok {
			return
		}
		p.pending[pendingSlot(k.src, k.dst, psn)] = pendingReq{key: k, psn: psn, ok: true}
	case pkt.Has(bth.Response):
		// The request went the other way: from our destination to our
		// source.
		r := &p.pending[pendingSlot(k.dst, k.src, psn)]
		if r.ok && r.psn == psn && r.key.src == k.dst && r.key.dst == k.src {
			p.pair(r.key, k.qp)
			r.ok = false
		}
	}
}

// pair records that flow k's destination QP talks to peerQP at the
// source's end.
func (p *peers) pair(k flowKey, peerQP uint32) {
	if q, ok := p.peer[k]; ok && q == peerQP {
		return
	}
	p.peer[k] = peerQP
	p.peer[k.reverse(peerQP)] = k.qp
}

// matchQP reports whether a packet of flow k belongs to QP qp's
// connection: it is addressed to qp, or it travels to qp's learnt peer in
// the direction opposite to packets addressed to qp.
func (p *peers) matchQP(k flowKey, qp uint32) bool {
	if k.qp == qp {
		return true
	}
	q, ok := p.peer[k]
	return ok && q == qp
}
