package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func algo(t *testing.T, p Params, name string) Algo {
	t.Helper()
	for _, a := range Algos(p) {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no algorithm %q", name)
	return Algo{}
}

// The DCQCN paper's claims at 40 Gb/s with Kmin 5 KB, Kmax 200 KB, Pmax 1 %
// (§5): the queue stays bounded without PFC and two flows converge to fair
// shares.
func TestDCQCNPaperProperties(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(1)[0] // fair2: a second flow joins at 10 ms
	if sc.Name != "fair2" {
		t.Fatalf("scenario %q", sc.Name)
	}
	r := NewSim(p, algo(t, p, "dcqcn-paper").Cfg, sc.Flows).Run(sc.Duration)
	res := Analyse(sc, "dcqcn-paper", r, p.LinkRate)
	t.Logf("%+v", res)
	if res.Jain < 0.95 {
		t.Errorf("Jain %.3f < 0.95", res.Jain)
	}
	if res.Converge < 0 {
		t.Errorf("never converged to fair shares")
	}
	if res.Pauses != 0 || res.Drops != 0 {
		t.Errorf("%d PFC pauses, %d drops: the queue was not held by ECN", res.Pauses, res.Drops)
	}
	if lim := 2 * p.RED.Kmax; res.QP99 > lim || res.QMax > p.XOff {
		t.Errorf("queue p99 %d B, max %d B: want p99 <= %d", res.QP99, res.QMax, lim)
	}
	if res.Util < 0.8 {
		t.Errorf("utilisation %.2f", res.Util)
	}
}

// The firmware preset's queue rides PFC because of its 32 KiB byte counter
// (the note under the table, package cc's documentation): two flows at
// 40 Gb/s pause the senders with it and never without it.
func TestFirmwareByteCounter(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(0.5)[0] // fair2: a second flow joins at 5 ms
	fw := NewSim(p, algo(t, p, "dcqcn").Cfg, sc.Flows).Run(sc.Duration)
	nobc := NewSim(p, algo(t, p, "dcqcn-nobc").Cfg, sc.Flows).Run(sc.Duration)
	rf, rn := Analyse(sc, "dcqcn", fw, p.LinkRate), Analyse(sc, "dcqcn-nobc", nobc, p.LinkRate)
	t.Logf("firmware %+v", rf)
	t.Logf("no byte counter %+v", rn)
	if rf.Pauses == 0 || rn.Pauses != 0 {
		t.Errorf("PFC pauses: %d with the byte counter, %d without; want some and none", rf.Pauses, rn.Pauses)
	}
	if rn.QP99 > p.XOff/2 || rf.QP99 < p.XOff*9/10 {
		t.Errorf("queue p99 %d B with the byte counter, %d B without; want near XOFF (%d B) and far below it", rf.QP99, rn.QP99, p.XOff)
	}
}

// Runs are deterministic for a seed, and the seed matters.
func TestDeterministic(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(0.1)[1] // incast8, 4 ms
	a := algo(t, p, "dcqcn")
	r1 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	r2 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	if !reflect.DeepEqual(r1, r2) {
		t.Fatal("two runs with one seed differ")
	}
	p.Seed = 2
	r3 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	if reflect.DeepEqual(r1.Queue, r3.Queue) {
		t.Fatal("the seed changes nothing")
	}
}

func TestEventQueueOrder(t *testing.T) {
	var q eventQueue
	for i, at := range []int64{5, 1, 3, 1, 9, 0, 3} {
		q.push(event{at: at, seq: uint64(i)})
	}
	var got []int64
	last := event{at: -1}
	for len(q) > 0 {
		e := q.pop()
		if e.at < last.at || (e.at == last.at && e.seq < last.seq) {
			t.Fatalf("out of order: %+v after %+v", e, last)
		}
		last = e
		got = append(got, e.at)
	}
	if !reflect.DeepEqual(got, []int64{0, 1, 1, 3, 3, 5, 9}) {
		t.Fatalf("order %v", got)
	}
}

func TestJain(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{[]float64{1, 1}, 1}, {[]float64{1, 0}, 0.5}, {[]float64{2, 2, 2, 2}, 1}, {[]float64{1, 0, 0, 0}, 0.25}} {
		if got := jain(tt.xs); got != tt.want {
			t.Errorf("jain(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, []Result{{Scenario: "fair2", Algo: "dcqcn", Jain: 0.99, Converge: 2e6, QP50: 2048}})
	if !strings.Contains(b.String(), "fair2") || !strings.Contains(b.String(), "2.00") {
		t.Fatalf("table:\n%s", b.String())
	}
}
