package qp

import (
	"testing"
	"unsafe"
)

// TestQPLayout pins the cache lines a SEND or WRITE and its ACK touch, on
// which BenchmarkManyQPs depends: with thousands of QPs every line is a
// miss. A field added in the wrong place fails here rather than only
// slowing the benchmark down.
func TestQPLayout(t *testing.T) {
	var q QP
	var b qpBlock
	// The runtime's size classes above 512 bytes are multiples of 64
	// and an object with pointers that large starts 8 bytes into its
	// slot, after its type header (Go 1.22's allocation headers): a
	// QP's field at offset off lies in line (off+8)/64 of its block.
	line := func(off uintptr) uintptr { return (off + 8) / 64 }
	attr, cfg, ctr := unsafe.Offsetof(q.attr), unsafe.Offsetof(q.cfg), unsafe.Offsetof(q.Counters)
	resp := unsafe.Offsetof(q.resp)
	rto := unsafe.Offsetof(q.rto)
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"the type and PD share the attributes' line of the destination", line(cfg+unsafe.Offsetof(q.cfg.Type)) == line(attr+unsafe.Offsetof(q.attr.DestQPN)) &&
			line(cfg+unsafe.Offsetof(q.cfg.PD)+3) == line(attr+unsafe.Offsetof(q.attr.DestQPN))},
		{"ccNone lies in the first line, with the state", line(unsafe.Offsetof(q.ccNone)) == line(unsafe.Offsetof(q.state)) && line(unsafe.Offsetof(q.ccNone)) == 0},
		{"the per-packet counters take one line", line(ctr) == line(ctr+unsafe.Offsetof(q.Counters.CompletedSends)+7)},
		{"a send WQE is four lines", unsafe.Sizeof(sendWQE{}) == 256},
		{"a one-SGE WQE's SGL lies in its first three lines", unsafe.Offsetof(sendWQE{}.mrBuf)+8+8 <= 192},
		{"the ACK timer ends a line", line(unsafe.Offsetof(q.retrans)) == line(resp-1) && line(resp) != line(resp-1)},
		{"rdRes and a WRITE's responder fields fill one line", line(resp) == line(resp+unsafe.Offsetof(q.resp.mr)+7)},
		{"rto's per-request fields take two lines", line(rto+unsafe.Offsetof(q.rto.suspect)) == line(rto)+1},
		{"cc starts a line", line(unsafe.Offsetof(b.cc)) != line(unsafe.Offsetof(b.cc)-1)},
		{"an unpaced QP's cc fields take one line", line(unsafe.Offsetof(b.cc)+unsafe.Offsetof(b.cc.ackReqAt)+23) == line(unsafe.Offsetof(b.cc))},
	} {
		if !c.ok {
			t.Errorf("%s: no longer so", c.what)
		}
	}
}
