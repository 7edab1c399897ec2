package qp

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/uroce/uroce/cc"
)

// TestQPLayout pins the cache lines a SEND or WRITE and its ACK touch, on
// which BenchmarkManyQPs depends: with thousands of QPs every line is a
// miss. A field added in the wrong place fails here rather than only
// slowing the benchmark down.
func TestQPLayout(t *testing.T) {
	var q QP
	var b qpBlock
	var sb qpBlockSmall
	// The runtime's size classes above 512 bytes are multiples of 64
	// and an object with pointers that large starts 8 bytes into its
	// slot, after its type header (Go 1.22's allocation headers): a
	// QP's field at offset off lies in line (off+8)/64 of its block.
	line := func(off uintptr) uintptr { return (off + 8) / 64 }
	// last is the line of a field's last byte.
	last := func(off, size uintptr) uintptr { return line(off + size - 1) }
	ctr, resp, rto := unsafe.Offsetof(q.ctr), unsafe.Offsetof(q.resp), unsafe.Offsetof(q.rto)
	for _, c := range []struct {
		what string
		ok   bool
	}{
		// What both sides read for every packet, the attributes and
		// configuration among it, is the first line.
		{"what the responder reads of a WRITE and its ACK is the first line: state, type, P_Key, destination, PD, access",
			line(unsafe.Offsetof(q.qpn)) == 0 && line(unsafe.Offsetof(q.state)) == 0 && line(unsafe.Offsetof(q.pkey)) == 0 &&
				line(unsafe.Offsetof(q.sport)) == 0 && line(unsafe.Offsetof(q.ccNone)) == 0 && line(unsafe.Offsetof(q.mtu)) == 0 &&
				line(unsafe.Offsetof(q.typ)) == 0 && line(unsafe.Offsetof(q.tclass)) == 0 && line(unsafe.Offsetof(q.retransFlags)) == 0 &&
				last(unsafe.Offsetof(q.destQPN), 4) == 0 && last(unsafe.Offsetof(q.pd), 4) == 0 && last(unsafe.Offsetof(q.access), 4) == 0 &&
				last(unsafe.Offsetof(q.destAddr), unsafe.Sizeof(q.destAddr)) == 0},
		{"the requester's attributes, the send CQ and the requester, its per-packet counters among it, fill the second line",
			line(unsafe.Offsetof(q.e)) == 1 && line(unsafe.Offsetof(q.sendCQ)) == 1 && line(unsafe.Offsetof(q.timeout)) == 1 &&
				line(unsafe.Offsetof(q.retryCnt)) == 1 && line(unsafe.Offsetof(q.signalAll)) == 1 &&
				line(unsafe.Offsetof(q.req)+unsafe.Offsetof(q.req.pkts)) == 1 && last(unsafe.Offsetof(q.req), unsafe.Sizeof(q.req)) == 1},
		{"the QP's ccState is its block's, found without a pointer", b.qp.cc() == &b.cc && sb.qp.cc() == &sb.cc},
		{"the completer, the send queue's header and the cc's SRTT fill the third line",
			line(unsafe.Offsetof(q.comp)) == 2 && line(unsafe.Offsetof(q.sq)) == 2 && last(unsafe.Offsetof(q.ccSRTT), 8) == 2},
		{"the ACK timer and the newest send's time are the fourth line",
			line(unsafe.Offsetof(q.retrans)) == 3 && last(unsafe.Offsetof(q.lastSent), unsafe.Sizeof(q.lastSent)) == 3},
		{"the receive CQ is beside the receive queue's header",
			line(unsafe.Offsetof(q.recvCQ)) == line(unsafe.Offsetof(q.rq))},
		// A timer's deadline in nanoseconds leaves it 24 bytes, and the
		// retrans timer and lastSent room for rto's first fields.
		{"a timer is 24 bytes", unsafe.Sizeof(timer{}) == 24},
		{"rto's per-request fields end the fourth line and fill the fifth",
			line(rto) == 3 && line(rto+unsafe.Offsetof(q.rto.srtt)) == 3 &&
				last(rto+unsafe.Offsetof(q.rto.samples), 4) == 4 && last(rto+unsafe.Offsetof(q.rto.suspect), 1) == 4 &&
				last(rto+unsafe.Offsetof(q.rto.retransPSN), 4) == 4 && line(rto+unsafe.Offsetof(q.rto.retransAt)) == 5},
		{"warmRequester loads a word of the fourth and fifth lines",
			line(unsafe.Offsetof(q.lastSent)) == 3 && line(rto+unsafe.Offsetof(q.rto.last)) == 4},
		// What a WRITE ONLY and its ACK touch of the responder, its
		// per-packet counters among it, is one line, and rdRes, which
		// Process reads for a QP owing responses, starts it. The rest
		// of a longer WRITE is in the next.
		{"resp starts the seventh line and its WRITE ONLY fields fill it",
			line(resp) == 6 && line(resp) != line(resp-1) && line(resp+unsafe.Offsetof(q.resp.pkts)) == 6 &&
				last(resp+unsafe.Offsetof(q.resp.ackDue), unsafe.Sizeof(q.resp.ackDue)) == 6 && last(resp+unsafe.Offsetof(q.resp.mr), 8) == 6},
		{"a longer WRITE's rest is the eighth line",
			line(resp+unsafe.Offsetof(q.resp.rkey)) == 7 && last(resp+unsafe.Offsetof(q.resp.va), 8) == 7},
		{"Counters lie past every line a request, a WRITE ONLY and their ACKs touch", line(ctr) > 7},
		{"a send WQE is four lines", unsafe.Sizeof(sendWQE{}) == 256},
		{"what PostSend writes of a one-SGE SEND, WRITE or READ is the WQE's first two lines", func() bool {
			var w sendWQE
			for _, end := range []uintptr{
				unsafe.Offsetof(w.wr) + unsafe.Sizeof(w.wr), unsafe.Offsetof(w.imm) + 4, unsafe.Offsetof(w.length) + 4,
				unsafe.Offsetof(w.firstPSN) + 4, unsafe.Offsetof(w.lastPSN) + 4, unsafe.Offsetof(w.offset) + 4,
				unsafe.Offsetof(w.state) + 1, unsafe.Offsetof(w.status) + 1, unsafe.Offsetof(w.validated) + 1,
				unsafe.Offsetof(w.hasRdAtomic) + 1, unsafe.Offsetof(w.posted) + 8, unsafe.Offsetof(w.sge) + unsafe.Sizeof(w.sge),
				unsafe.Offsetof(w.mrs) + unsafe.Sizeof(w.mrs), unsafe.Offsetof(w.sgeBuf) + unsafe.Sizeof(w.sgeBuf),
				unsafe.Offsetof(w.mrBuf) + unsafe.Sizeof(w.mrBuf),
			} {
				if end > 128 {
					return false
				}
			}
			return true
		}()},
		{"a small ring's WQEs start lines", line(unsafe.Offsetof(sb.sq)) != line(unsafe.Offsetof(sb.sq)-1)},
		// The 4096-byte size class's objects are pages: a block that
		// outgrew it would straddle two.
		{"a block with its small ring, and its type header, fit in a page", unsafe.Sizeof(sb)+8 <= 4096},
		{"cc starts a line", line(unsafe.Offsetof(b.cc)) != line(unsafe.Offsetof(b.cc)-1)},
		{"an unpaced QP's cc fields take one line", line(unsafe.Offsetof(b.cc)+unsafe.Offsetof(b.cc.ackReqAt)+23) == line(unsafe.Offsetof(b.cc))},
	} {
		if !c.ok {
			t.Errorf("%s: no longer so", c.what)
		}
	}
}

// TestQPAttrConfig checks that Attr and Config give back every field a QP
// was created and modified with: the QP stores the per-packet ones in its
// first lines and the rest apart, and a field left out of either would
// read as zero.
func TestQPAttrConfig(t *testing.T) {
	e := NewEngine(&fakePort{free: -1, size: 4200})
	scq, rcq := NewCQ(4), NewCQ(4)
	srq, err := e.CreateSRQ(SRQConfig{PD: 3, MaxWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := cc.DefaultConfig(cc.KindNone, DefaultLineRate)
	cfg := QPConfig{Type: QPTypeRC, PD: 3, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 5, MaxRecvWR: 6,
		MaxSendSGE: 2, MaxRecvSGE: 3, MaxInline: 64, SRQ: srq, SignalAll: true, CC: &ccfg, AckDelay: time.Microsecond}
	q, err := e.CreateQP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := Attr{State: StateRTS, AccessFlags: AccessRemoteWrite | AccessRemoteRead, PKey: 0x8001,
		DestAddr: netip.MustParseAddr("10.0.0.2"), HopLimit: 64, TrafficClass: 0x68, PathMTU: 1024,
		DestQPN: 0x123, RQPSN: 77, SQPSN: 99, Timeout: 14, RetryCnt: 6, RNRRetry: 5, Retrans: RetransFixed,
		MinRNRTimer: 12, MaxRdAtomic: 4, MaxDestRdAtomic: 8}
	for _, s := range []struct {
		st QPState
		m  AttrMask
	}{
		{StateInit, AttrPKeyIndex | AttrPort | AttrAccessFlags},
		{StateRTR, AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer | AttrRetrans},
		{StateRTS, AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic},
	} {
		a := want
		a.State = s.st
		if err := q.Modify(&a, AttrState|s.m); err != nil {
			t.Fatal(err)
		}
	}
	got := q.Attr()
	if got != want {
		t.Errorf("Attr() = %+v, want %+v", got, want)
	}
	// Every field but a UD QP's QKey was set: one added to Attr and
	// not to what Attr assembles fails here.
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if f := v.Type().Field(i).Name; f != "QKey" && v.Field(i).IsZero() {
			t.Errorf("Attr().%s is zero", f)
		}
	}
	if c := q.Config(); c != cfg {
		t.Errorf("Config() = %+v, want %+v", c, cfg)
	}
	v = reflect.ValueOf(q.Config())
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Config().%s is zero", v.Type().Field(i).Name)
		}
	}
}
