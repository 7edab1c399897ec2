// Command engcount turns two callgrind runs of one benchmark into exact
// counts per message: instructions, and the last-level cache misses of
// callgrind's cache model, per function and in total. Timing on a shared
// virtual machine moves by a few per cent from run to run; these counts do
// not, so a change to the engine's work shows in them at once.
//
// The two runs differ only in their iteration count (-benchtime Nx): the
// difference of their costs, divided by the difference of the counts, is
// the cost of one iteration without the setup. scripts/engcount makes the
// runs and calls this with the files and the counts:
//
//	engcount [-top K] N1 FILE1 N2 FILE2
//
// It reads callgrind_annotate's per-function table (self cost, inlined
// callees included), so callgrind_annotate must be on the PATH.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// cost is one function's self cost: instructions, and LL read and write
// misses (zero when the run simulated no cache).
type cost [3]float64

// parse reads callgrind_annotate's function table: after the header line
// that ends in "file:function", one line per function of comma-grouped
// counts, each followed by its share in parentheses or given as ".", then
// "file:function [binary]". It stops at the first line of annotated source.
func parse(r io.Reader) (map[string]cost, error) {
	out := map[string]cost{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-- Auto-annotated source") {
			break
		}
		if strings.HasSuffix(strings.TrimSpace(line), "file:function") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "---") || strings.TrimSpace(line) == "" {
			continue
		}
		var c cost
		f := strings.Fields(line)
		n, i := 0, 0
		for ; i < len(f) && n < len(c); i++ {
			tok := f[i]
			if strings.HasPrefix(tok, "(") || strings.HasSuffix(tok, "%)") {
				continue // a share: "(", "7.71%)" or "(100.0%)"
			}
			if tok == "." {
				n++
				continue
			}
			v, err := strconv.ParseFloat(strings.ReplaceAll(tok, ",", ""), 64)
			if err != nil {
				break
			}
			c[n] = v
			n++
		}
		for i < len(f) && (strings.HasPrefix(f[i], "(") || strings.HasSuffix(f[i], "%)")) {
			i++
		}
		if n == 0 || i >= len(f) {
			continue
		}
		name := f[i]
		if j := strings.Index(name, ":"); j >= 0 {
			name = name[j+1:] // drop the file
		}
		prev := out[name]
		for k := range c {
			prev[k] += c[k]
		}
		out[name] = prev
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !in {
		return nil, errors.New("no function table in the input")
	}
	return out, nil
}

// icrc reports whether a function computes the ICRC: the cost the
// message-rate goal divides by. sync.(*Once).Do counts with it: on the
// engine's paths only hash/crc32 calls it, on every update, to check
// that its tables are made.
func icrc(name string) bool {
	for _, p := range []string{"bth.headerCRC", "bth.ICRC", "bth.shortCRC", "bth.PutICRC", "bth.VerifyICRC", "hash/crc32.", "sync.(*Once).Do"} {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

type row struct {
	name string
	c    cost
}

// perIter returns each function's cost per iteration, largest first.
func perIter(a, b map[string]cost, n float64) []row {
	var rows []row
	for name, cb := range b {
		ca := a[name]
		var d cost
		for k := range d {
			d[k] = (cb[k] - ca[k]) / n
		}
		if d != (cost{}) {
			rows = append(rows, row{name, d})
		}
	}
	slices.SortFunc(rows, func(x, y row) int {
		if x.c[0] != y.c[0] {
			if x.c[0] > y.c[0] {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	return rows
}

func annotate(file string) (map[string]cost, error) {
	cmd := exec.Command("callgrind_annotate", "--inclusive=no", "--threshold=100", "--show=Ir,DLmr,DLmw", file)
	out, err := cmd.Output()
	if err != nil {
		// A run without the cache model has no DLmr or DLmw to show.
		cmd = exec.Command("callgrind_annotate", "--inclusive=no", "--threshold=100", "--show=Ir", file)
		if out, err = cmd.Output(); err != nil {
			return nil, fmt.Errorf("callgrind_annotate %s: %w", file, err)
		}
	}
	c, err := parse(strings.NewReader(string(out)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

func report(w io.Writer, rows []row, top int) {
	var all, crc cost
	for _, r := range rows {
		for k := range all {
			all[k] += r.c[k]
			if icrc(r.name) {
				crc[k] += r.c[k]
			}
		}
	}
	fmt.Fprintf(w, "per iteration: %.0f instructions (ICRC %.0f, the rest %.0f)", all[0], crc[0], all[0]-crc[0])
	if all[1]+all[2] > 0 {
		fmt.Fprintf(w, "; LL misses %.2f (read %.2f, write %.2f)", all[1]+all[2], all[1], all[2])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%10s %8s %8s  %s\n", "instr", "LL rd", "LL wr", "function (self, inlined callees included)")
	for i, r := range rows {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%10.1f %8.2f %8.2f  %s\n", r.c[0], zero(r.c[1]), zero(r.c[2]), r.name)
	}
}

// zero rounds a difference that is nothing but setup noise, which
// prints as -0.00, to 0.
func zero(v float64) float64 {
	if v > -0.005 && v < 0.005 {
		return 0
	}
	return v
}

func main() {
	top := flag.Int("top", 30, "functions to list")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: engcount [-top K] N1 FILE1 N2 FILE2")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 4 {
		flag.Usage()
		os.Exit(2)
	}
	n1, err1 := strconv.ParseFloat(flag.Arg(0), 64)
	n2, err2 := strconv.ParseFloat(flag.Arg(2), 64)
	if err1 != nil || err2 != nil || n2 <= n1 {
		fmt.Fprintln(os.Stderr, "engcount: the counts must be numbers, N2 above N1")
		os.Exit(2)
	}
	a, err := annotate(flag.Arg(1))
	if err == nil {
		var b map[string]cost
		if b, err = annotate(flag.Arg(3)); err == nil {
			report(os.Stdout, perIter(a, b, n2-n1), *top)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "engcount:", err)
	os.Exit(1)
}
