// Command engratio reads the output of `go test -bench` and prints the
// median of each benchmark's metrics and the engine's goal ratios (issue
// 19), each a median over the runs of -count:
//
//	message rate  Bandwidth/RDMA_WRITE/64 ns/op ÷ ICRC/64B icrc-ns/pkt   goal ≤ 8
//	flat with QPs ManyQPs/10000 ns/op ÷ ManyQPs/10 ns/op                  goal ≤ 1.3
//
// scripts/engbench runs the benchmarks in one go test invocation and pipes
// them here. A ratio whose benchmarks are missing from the input is left
// out. The input is echoed to standard error unless -q is given.
//
// On a shared machine the load moves between the two benchmarks of one
// invocation. The script can run several invocations (rounds), each
// introduced by a line "engbench round N"; each ratio is then also given
// per round, from that round's medians, with the median of those.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/uroce/uroce/internal/stats"
)

// A ratio is one goal: the median of num's metric over the median of den's.
type ratio struct {
	name     string
	num, den metric
	goal     float64
}

type metric struct{ bench, unit string }

var ratios = []ratio{
	{"message rate", metric{"Bandwidth/RDMA_WRITE/64", "ns/op"}, metric{"ICRC/64B", "icrc-ns/pkt"}, 8},
	{"flat with QPs", metric{"ManyQPs/10000", "ns/op"}, metric{"ManyQPs/10", "ns/op"}, 1.3},
}

// procSuffix is the -GOMAXPROCS suffix go test appends to a name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// results maps a benchmark (without "Benchmark" and the suffix) to its
// values per unit, in the order of the runs.
type results map[string]map[string][]float64

// parse reads benchmark lines ("BenchmarkX-2  N  v unit  v unit ...") and
// echoes every line to echo when it is not nil. It returns the results of
// all rounds together and of each round.
func parse(r io.Reader, echo io.Writer) (results, []string, []results, error) {
	res := results{}
	var rounds []results
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if echo != nil {
			fmt.Fprintln(echo, line)
		}
		if strings.HasPrefix(line, "engbench round ") {
			rounds = append(rounds, results{})
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if _, ok := res[name]; !ok {
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			res.add(name, f[i+1], v)
			if len(rounds) > 0 {
				rounds[len(rounds)-1].add(name, f[i+1], v)
			}
		}
	}
	return res, order, rounds, sc.Err()
}

func (r results) add(name, unit string, v float64) {
	m := r[name]
	if m == nil {
		m = map[string][]float64{}
		r[name] = m
	}
	m[unit] = append(m[unit], v)
}

func (r results) get(m metric) []float64 { return r[m.bench][m.unit] }

func main() {
	quiet := flag.Bool("q", false, "do not echo the input")
	flag.Parse()
	var echo io.Writer = os.Stderr
	if *quiet {
		echo = nil
	}
	res, order, rounds, err := parse(os.Stdin, echo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "engratio:", err)
		os.Exit(1)
	}
	fmt.Printf("%-32s %-14s %4s %10s %10s %10s\n", "benchmark", "unit", "runs", "median", "min", "max")
	for _, name := range order {
		units := make([]string, 0, len(res[name]))
		for u := range res[name] {
			units = append(units, u)
		}
		slices.Sort(units)
		for _, u := range units {
			if u != "ns/op" && u != "icrc-ns/pkt" && u != "allocs/op" {
				continue
			}
			v := res[name][u]
			fmt.Printf("%-32s %-14s %4d %10.4g %10.4g %10.4g\n", name, u, len(v), stats.Median(v), slices.Min(v), slices.Max(v))
		}
	}
	fmt.Println()
	for _, r := range ratios {
		n, d := res.get(r.num), res.get(r.den)
		if len(n) == 0 || len(d) == 0 {
			continue
		}
		x := stats.Median(n) / stats.Median(d)
		var per []float64
		for _, rr := range rounds {
			if n, d := rr.get(r.num), rr.get(r.den); len(n) > 0 && len(d) > 0 {
				per = append(per, stats.Median(n)/stats.Median(d))
			}
		}
		if len(per) > 1 {
			x = stats.Median(per)
		}
		verdict := "met"
		if x > r.goal {
			verdict = "not met"
		}
		fmt.Printf("%-14s %s %s ÷ %s %s = %.2f (goal ≤ %g: %s)\n", r.name+":", r.num.bench, r.num.unit, r.den.bench, r.den.unit, x, r.goal, verdict)
		if len(per) > 1 {
			fmt.Printf("%-14s median of %d rounds; per round:", "", len(per))
			for _, v := range per {
				fmt.Printf(" %.2f", v)
			}
			fmt.Println()
		}
	}
}
