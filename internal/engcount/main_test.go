package main

import (
	"bytes"
	"strings"
	"testing"
)

const table = `--------------------------------------------------------------------------------
Ir                     DLmr               DLmw               
--------------------------------------------------------------------------------
2,661,784,943 (100.0%) 1,906,130 (100.0%) 2,413,576 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                   DLmr             DLmw                file:function
--------------------------------------------------------------------------------
205,200,000 ( 7.71%)     939 ( 0.05%)         .           /w/bth/icrc.go:github.com/uroce/uroce/bth.headerCRC [/tmp/qp.test]
 39,600,843 ( 1.49%) 900,013 (47.22%) 1,199,919 (49.72%)  /w/qp/qp.go:github.com/uroce/uroce/qp.(*QP).PostSend [/tmp/qp.test]
     12,000 ( 0.00%)       .                  .           ???:runtime.memmove [/tmp/qp.test]

--------------------------------------------------------------------------------
-- Auto-annotated source: /w/qp/qp.go
--------------------------------------------------------------------------------
 39,600,843 ( 1.49%) 900,013 (47.22%) 1,199,919 (49.72%)  	if !q.state.CanPostSend() {
`

func TestParse(t *testing.T) {
	got, err := parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want cost
	}{
		{"github.com/uroce/uroce/bth.headerCRC", cost{205200000, 939, 0}},
		{"github.com/uroce/uroce/qp.(*QP).PostSend", cost{39600843, 900013, 1199919}},
		{"runtime.memmove", cost{12000, 0, 0}},
	} {
		if got[c.name] != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got[c.name], c.want)
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d functions, want 3 (the source annotation is not a table): %v", len(got), got)
	}
	if _, err := parse(strings.NewReader("no table here\n")); err == nil {
		t.Error("input without a function table: no error")
	}
}

func TestPerIterReport(t *testing.T) {
	a := map[string]cost{"bth.headerCRC": {1000, 0, 0}, "qp.(*QP).PostSend": {500, 10, 0}}
	b := map[string]cost{"bth.headerCRC": {3000, 0, 0}, "qp.(*QP).PostSend": {2500, 30, 20}, "setup.only": {7, 0, 0}}
	rows := perIter(a, b, 10)
	if len(rows) != 3 || rows[0].name != "bth.headerCRC" || rows[0].c != (cost{200, 0, 0}) || rows[1].c != (cost{200, 2, 2}) {
		t.Fatalf("rows %v", rows)
	}
	var out bytes.Buffer
	report(&out, rows, 2)
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if want := "per iteration: 401 instructions (ICRC 200, the rest 201); LL misses 4.00 (read 2.00, write 2.00)"; first != want {
		t.Errorf("summary %q, want %q", first, want)
	}
	if strings.Contains(out.String(), "setup.only") {
		t.Error("-top 2 listed a third function")
	}
}
