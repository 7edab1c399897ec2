// Command alternate compares test binaries built from different trees by
// running their benchmarks in turn, round after round, and printing for
// each binary the median ns/op of every benchmark and the median of its
// per-round differences from the first binary's.
//
// On a shared machine a benchmark moves by more between minutes than most
// changes move it; runs taken one right after the other share the
// machine's state, so the paired differences show a change that the
// spread of either binary's own runs would hide (verbs/BENCHMARKS.md):
//
//	go test -c -o /tmp/old.test ./qp     # on the tree before
//	go test -c -o /tmp/new.test ./qp     # on the tree after
//	go run ./internal/alternate -dir qp -bench 'BenchmarkManyQPs/10000$' /tmp/old.test /tmp/new.test
//
// Each run is `binary -test.run XXX -test.bench B -test.benchtime T
// -test.count 1` in -dir, the package's directory, where its tests find
// their testdata.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/uroce/uroce/internal/stats"
)

func main() {
	rounds := flag.Int("rounds", 30, "rounds: every binary runs once a round, in the order given")
	bench := flag.String("bench", "", "the benchmarks to run (-test.bench)")
	benchtime := flag.String("benchtime", "300000x", "each run's -test.benchtime")
	dir := flag.String("dir", ".", "the directory to run the binaries in")
	flag.Parse()
	bins := flag.Args()
	if *bench == "" || len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "usage: alternate [-rounds N] [-benchtime T] [-dir D] -bench B binary...")
		os.Exit(2)
	}
	for i, b := range bins {
		abs, err := filepath.Abs(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, "alternate:", err)
			os.Exit(1)
		}
		bins[i] = abs
	}
	runs := make([][]map[string]float64, len(bins)) // [binary][round]
	for r := 0; r < *rounds; r++ {
		for i, b := range bins {
			cmd := exec.Command(b, "-test.run", "XXX", "-test.bench", *bench, "-test.benchtime", *benchtime, "-test.count", "1")
			cmd.Dir = *dir
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				fmt.Fprintf(os.Stderr, "alternate: %s: %v\n%s", b, err, out)
				os.Exit(1)
			}
			runs[i] = append(runs[i], parse(bytes.NewReader(out)))
		}
	}
	report(os.Stdout, bins, runs)
}

// parse returns the ns/op of each benchmark in go test's output, by name
// without the -GOMAXPROCS suffix.
func parse(r io.Reader) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i+1] == "ns/op" {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					name := f[0]
					if j := strings.LastIndexByte(name, '-'); j > 0 {
						name = name[:j]
					}
					m[name] = v
				}
			}
		}
	}
	return m
}

// report prints, per benchmark and binary, the median ns/op over the
// rounds and the median of the differences from the first binary's run
// in the same round.
func report(w io.Writer, bins []string, runs [][]map[string]float64) {
	var names []string
	seen := map[string]bool{}
	for _, round := range runs[0] {
		for n := range round {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "%s (%d rounds)\n", n, len(runs[0]))
		for i, b := range bins {
			var vs, ds []float64
			for r, round := range runs[i] {
				v, ok := round[n]
				if !ok {
					continue
				}
				vs = append(vs, v)
				if base, ok := runs[0][r][n]; ok {
					ds = append(ds, v-base)
				}
			}
			if len(vs) == 0 {
				fmt.Fprintf(w, "  %-24s no runs\n", filepath.Base(b))
				continue
			}
			fmt.Fprintf(w, "  %-24s median %8.1f ns/op   paired difference %+7.1f ns\n", filepath.Base(b), stats.Median(vs), stats.Median(ds))
		}
	}
}
