package cc_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/uroce/uroce/cc"
)

// TestCounterTable: every field of Counters has one row in CounterTable,
// in field order, whose Ptr points at it, with a distinct name and help;
// Add and Named go by the table.
func TestCounterTable(t *testing.T) {
	var c cc.Counters
	v := reflect.ValueOf(&c).Elem()
	var fields, rows []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Uint64 {
			t.Errorf("Counters.%s is a %s: a counter is a uint64 with a row in the table", f.Name, f.Type)
		}
		fields = append(fields, f.Name)
		v.Field(i).SetUint(uint64(10 + i))
	}
	names := map[string]bool{}
	for _, d := range cc.CounterTable {
		rows = append(rows, d.Field)
		f := v.FieldByName(d.Field)
		if !f.IsValid() || f.Kind() != reflect.Uint64 || d.Ptr(&c) != f.Addr().Interface().(*uint64) {
			t.Errorf("row %s: Ptr does not point at a counter of that name", d.Field)
		}
		if d.Name == "" || d.Help == "" || names[d.Name] {
			t.Errorf("row %s: name %q (or used twice), help %q", d.Field, d.Name, d.Help)
		}
		names[d.Name] = true
	}
	if !slices.Equal(fields, rows) {
		t.Errorf("Counters has fields\n%v\nand CounterTable rows\n%v", fields, rows)
	}
	sum := c
	sum.Add(c)
	for i, n := range sum.Named() {
		d := cc.CounterTable[i]
		if want := 2 * *d.Ptr(&c); n.Name != d.Name || n.Value != want {
			t.Errorf("Named()[%d] of the doubled counters = %+v, want %s = %d", i, n, d.Name, want)
		}
	}
}
