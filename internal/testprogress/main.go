// Command testprogress turns the event stream of `go test -json` back into
// what `go test` prints without it, and adds progress for slow packages:
//
//	go test -json ./... | go run ./internal/testprogress -v 'tests/interop$'
//
// It prints every package's closing line ("ok", "FAIL", "?" for no test
// files) and, for a package that fails, all that go test would have shown:
// the whole output of each failing test and the package's own output. For
// the packages -v matches it also prints each test's and subtest's result
// line ("--- PASS: TestPerfRxe/ib_write_lat/client (3.2s)") the moment it
// ends, so that a suite that runs for minutes shows it is alive.
//
// -json is what makes go test stream a package's events while it runs;
// without -json or -v it shows a package's output only when the package
// ends. A line that is not a JSON event is printed as it is. The exit
// status is 1 when any package or build failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

func main() {
	verbose := flag.String("v", "", "print each test's result line as it ends, for packages matching this `regexp`")
	flag.Parse()
	var re *regexp.Regexp
	if *verbose != "" {
		var err error
		if re, err = regexp.Compile(*verbose); err != nil {
			fmt.Fprintln(os.Stderr, "testprogress: -v:", err)
			os.Exit(2)
		}
	}
	failed, err := filter(os.Stdin, os.Stdout, re)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// pkgState is what is held back for one package until it ends.
type pkgState struct {
	out   strings.Builder             // the package's own output
	tests map[string]*strings.Builder // each running test's output
	order []string                    // tests in the order they started
}

// filter copies r to w as main describes and says whether anything failed.
func filter(r io.Reader, w io.Writer, verbose *regexp.Regexp) (failed bool, err error) {
	pkgs := map[string]*pkgState{}
	state := func(p string) *pkgState {
		s := pkgs[p]
		if s == nil {
			s = &pkgState{tests: map[string]*strings.Builder{}}
			pkgs[p] = s
		}
		return s
	}
	bw := bufio.NewWriter(w)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			bw.Write(line)
			bw.WriteByte('\n')
			bw.Flush()
			continue
		}
		switch e.Action {
		case "build-output":
			bw.WriteString(e.Output)
		case "build-fail":
			failed = true
		case "output":
			s := state(e.Package)
			if e.Test == "" {
				s.out.WriteString(e.Output)
				break
			}
			b := s.tests[e.Test]
			if b == nil {
				b = new(strings.Builder)
				s.tests[e.Test] = b
				s.order = append(s.order, e.Test)
			}
			b.WriteString(e.Output)
		case "pass", "skip", "fail":
			s := state(e.Package)
			if e.Test != "" {
				out := ""
				if b := s.tests[e.Test]; b != nil {
					out = b.String()
				}
				delete(s.tests, e.Test)
				switch {
				case e.Action == "fail":
					bw.WriteString(out)
				case verbose != nil && verbose.MatchString(e.Package):
					bw.WriteString(resultLine(out))
				}
				break
			}
			// The package ended.
			if e.Action == "fail" {
				failed = true
				// Tests that never reported (a panic, a timeout)
				// keep what they printed: it says why.
				for _, t := range s.order {
					if b := s.tests[t]; b != nil {
						bw.WriteString(b.String())
					}
				}
				bw.WriteString(s.out.String())
			} else {
				bw.WriteString(summary(s.out.String()))
			}
			delete(pkgs, e.Package)
		}
		bw.Flush()
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// Packages still open when the stream ends (go test was killed)
	// show what they printed.
	for _, s := range pkgs {
		if s.out.Len() > 0 || len(s.tests) > 0 {
			failed = true
			for _, t := range s.order {
				if b := s.tests[t]; b != nil {
					bw.WriteString(b.String())
				}
			}
			bw.WriteString(s.out.String())
		}
	}
	return failed, bw.Flush()
}

// resultLine returns a finished test's "--- PASS" or "--- SKIP" line, and
// for a skip the reason printed under it.
func resultLine(out string) string {
	i := strings.LastIndex(out, "--- ")
	if i < 0 || (i > 0 && out[i-1] != '\n') {
		return ""
	}
	return out[i:]
}

// summary returns what go test prints for a package that passed: its
// closing line ("ok ...", "? ... [no test files]") and any line printed
// after the test binary's "PASS", such as coverage.
func summary(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "?   \t") || strings.HasPrefix(l, "coverage: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}
