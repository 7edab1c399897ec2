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
	line := func(off uintptr) uintptr { return off / 64 }
	resp := unsafe.Offsetof(q.resp)
	rto := unsafe.Offsetof(q.rto)
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"a send WQE is four lines", unsafe.Sizeof(sendWQE{}) == 256},
		{"a one-SGE WQE's SGL lies in its first three lines", unsafe.Offsetof(sendWQE{}.mrBuf)+8 <= 192},
		{"rdRes shares the ACK timer's line", line(resp) == line(unsafe.Offsetof(q.retrans))},
		{"a WRITE's responder fields fill one line", line(resp+unsafe.Offsetof(q.resp.psn)) == line(resp+unsafe.Offsetof(q.resp.status))},
		{"rto starts a line", rto%64 == 0},
		{"rto's per-request fields take two lines", unsafe.Offsetof(q.rto.suspect) < 128},
		{"cc starts a line", unsafe.Offsetof(b.cc)%64 == 0},
		{"an unpaced QP's cc fields take one line", unsafe.Offsetof(b.cc.epoch)+unsafe.Sizeof(b.cc.epoch) <= 64},
	} {
		if !c.ok {
			t.Errorf("%s: no longer so", c.what)
		}
	}
}
