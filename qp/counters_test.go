package qp

import (
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/uroce/uroce/pkg/netem"
)

// TestRDMASends checks rxe's rdma_sends: SEND and SEND with immediate WRs
// completed, whether signaled or not, and no other opcode; the receiver's
// CompletedRecvs (rdma_recvs) matches them.
func TestRDMASends(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Drop: 0.05}, seed: 11, retry: 7, timeout: 8})
	ops := []WROpcode{WRSend, WRWrite, WRSendWithImm, WRRead, WRSend, WRWriteWithImm, WRFetchAdd, WRSend}
	sends, recvs := uint64(0), uint64(0)
	for i, op := range ops {
		switch op {
		case WRSend, WRSendWithImm:
			sends++
			fallthrough
		case WRWriteWithImm:
			recvs++
			if err := p.b.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{p.b.sge(4096, 2048)}}); err != nil {
				t.Fatal(err)
			}
		}
		wr := SendWR{ID: uint64(i), Opcode: op, SGL: []SGE{p.a.sge(0, 1500)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
		if op == WRFetchAdd {
			wr.SGL = []SGE{p.a.sge(0, 8)}
		}
		if i%2 == 0 {
			wr.Flags = FlagSignaled
		}
		if err := p.a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
	}
	p.run(func() bool { return p.a.qp.sq.head == p.a.qp.sq.tail })
	a, b := p.a.qp.Counters(), p.b.qp.Counters()
	if a.CompletedSends != uint64(len(ops)) || a.RDMASends != sends {
		t.Fatalf("completed %d WRs, %d of them SENDs; want %d and %d", a.CompletedSends, a.RDMASends, len(ops), sends)
	}
	if b.RDMASends != 0 || b.CompletedRecvs != recvs {
		t.Fatalf("receiver: %d SENDs, %d receives completed; want 0 and %d", b.RDMASends, b.CompletedRecvs, recvs)
	}
	if a.Retransmits == 0 {
		t.Fatal("no retransmission under 5 % loss: the test did not exercise retries")
	}
	if s := p.a.e.Stats(); s.RDMASends != sends {
		t.Fatalf("engine rdma_sends %d, want %d", s.RDMASends, sends)
	}
}

// TestCounterTables: every counter field of Counters and EngineCounters
// has one row in CounterTable or EngineCounterTable, in field order, whose
// Ptr points at that field, and no two rows share an exported name. A
// counter added without its row, or a row without its field, fails here.
func TestCounterTables(t *testing.T) {
	names := map[string]string{}
	checkCounterTable(t, CounterTable, nil, names)
	// EngineCounters embeds the summed Counters, checked above, and holds
	// the cc counters, which cc's own table describes.
	checkCounterTable(t, EngineCounterTable, []string{"Counters", "CC"}, names)
}

var counterName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func checkCounterTable[T any](t *testing.T, table []CounterDesc[T], skip []string, names map[string]string) {
	t.Helper()
	var c T
	v := reflect.ValueOf(&c).Elem()
	var fields, rows []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if slices.Contains(skip, f.Name) {
			continue
		}
		if f.Type.Kind() != reflect.Uint64 {
			t.Errorf("%s.%s is a %s: a counter is a uint64 with a row in the table", v.Type(), f.Name, f.Type)
			continue
		}
		fields = append(fields, f.Name)
	}
	for _, d := range table {
		rows = append(rows, d.Field)
		f := v.FieldByName(d.Field)
		if !f.IsValid() || f.Kind() != reflect.Uint64 {
			t.Errorf("row %s: %s has no such counter", d.Field, v.Type())
			continue
		}
		if d.Ptr(&c) != f.Addr().Interface().(*uint64) {
			t.Errorf("row %s: Ptr points at another field", d.Field)
		}
		if !counterName.MatchString(d.Name) || d.Help == "" {
			t.Errorf("row %s: name %q, help %q", d.Field, d.Name, d.Help)
		}
		if other, ok := names[d.Name]; ok {
			t.Errorf("rows %s and %s are both exported as %s", other, d.Field, d.Name)
		}
		names[d.Name] = d.Field
	}
	if !slices.Equal(fields, rows) {
		t.Errorf("%s has counters\n%v\nand its table rows\n%v", v.Type(), fields, rows)
	}
}

// TestStatsSumsEveryCounter: Stats adds every counter of every live QP to
// the engine's own, and leaves the engine-only counters as they are.
func TestStatsSumsEveryCounter(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024})
	e := p.a.e
	q2, err := e.CreateQP(QPConfig{PD: 1, SendCQ: p.a.scq, RecvCQ: p.a.rcq, MaxSendWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	set := func(v reflect.Value, base uint64) {
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Uint64 {
				f.SetUint(base + uint64(i))
			}
		}
	}
	set(reflect.ValueOf(&e.Counters).Elem(), 1000)
	set(reflect.ValueOf(&e.Counters.Counters).Elem(), 2000)
	for _, q := range []*QP{p.a.qp, q2} {
		q.req.pkts, q.resp.pkts = pktCounts{}, pktCounts{}
		q.req.posted, q.req.done, q.resp.done = 0, 0, 0
	}
	set(reflect.ValueOf(&p.a.qp.ctr).Elem(), 30000)
	set(reflect.ValueOf(&q2.ctr).Elem(), 400000)
	s := e.Stats()
	got := reflect.ValueOf(s.Counters)
	for i := range got.NumField() {
		if want := uint64(432000 + 3*i); got.Field(i).Uint() != want {
			t.Errorf("%s = %d, want %d", got.Type().Field(i).Name, got.Field(i).Uint(), want)
		}
	}
	for _, d := range EngineCounterTable {
		if *d.Ptr(&s) != *d.Ptr(&e.Counters) {
			t.Errorf("%s = %d, want the engine's %d", d.Field, *d.Ptr(&s), *d.Ptr(&e.Counters))
		}
	}
}

// TestPktCountsCarry: the requester's and the responder's narrow
// per-packet counts carry into Counters when they wrap, and Counters adds
// what both sides hold, so the sums stay exact past 2^16 packets (and
// WRs) and 2^32 bytes.
func TestPktCountsCarry(t *testing.T) {
	var q QP
	var want Counters
	add := func(c *uint64, n uint64) { *c += n }
	for i := range 70000 {
		n := 4096 + i%64
		q.req.pkts.sent(n, &q.ctr)
		add(&want.TxPackets, 1)
		add(&want.TxBytes, uint64(n))
		q.resp.pkts.rcvd(n*16, &q.ctr)
		add(&want.RxPackets, 1)
		add(&want.RxBytes, uint64(n*16))
		q.resp.pkts.sent(0, &q.ctr)
		add(&want.TxPackets, 1)
		if i%2 == 0 {
			q.req.pkts.rcvd(7, &q.ctr)
			add(&want.RxPackets, 1)
			add(&want.RxBytes, 7)
		}
		count16(&q.req.posted, &q.ctr.PostedSends)
		add(&want.PostedSends, 1)
		count16(&q.req.done, &q.ctr.CompletedSends)
		add(&want.CompletedSends, 1)
		if i%3 == 0 {
			count16(&q.resp.done, &q.ctr.CompletedRecvs)
			add(&want.CompletedRecvs, 1)
		}
	}
	q.ctr.Retransmits = 5
	want.Retransmits = 5
	if want.RxBytes <= 1<<32 {
		t.Fatalf("the test moves %d bytes: too few to wrap", want.RxBytes)
	}
	if got := q.Counters(); got != want {
		t.Errorf("Counters() = %+v\nwant %+v", got, want)
	}
}
