package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
BenchmarkManyQPs/10-2         	  300000	       618.3 ns/op	       0 B/op	       0 allocs/op
BenchmarkManyQPs/10000-2      	  300000	      1205 ns/op	       3 B/op	       0 allocs/op
BenchmarkICRC/64B-2           	  100000	     10780 ns/op	        24.34 icrc-ns/pkt
PASS
`
	got := parse(strings.NewReader(out))
	want := map[string]float64{"BenchmarkManyQPs/10": 618.3, "BenchmarkManyQPs/10000": 1205, "BenchmarkICRC/64B": 10780}
	if len(got) != len(want) {
		t.Fatalf("parse = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parse[%q] = %v, want %v", k, got[k], v)
		}
	}
}

func TestReport(t *testing.T) {
	// The second binary is 10 ns slower in every round, while the
	// rounds themselves move by 100 ns: the paired difference is 10.
	runs := [][]map[string]float64{
		{{"B": 1000}, {"B": 1100}, {"B": 1200}},
		{{"B": 1010}, {"B": 1110}, {"B": 1210}},
	}
	var sb strings.Builder
	report(&sb, []string{"/x/old.test", "/x/new.test"}, runs)
	for _, want := range []string{"B (3 rounds)", "old.test", "median   1100.0 ns/op   paired difference    +0.0 ns", "median   1110.0 ns/op   paired difference   +10.0 ns"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, sb.String())
		}
	}
}
