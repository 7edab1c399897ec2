package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The streams in testdata are real `go test -json` runs: sample.json of a
// module made for this test (a package with passing, failing, skipped and
// parallel tests and subtests, one that passes, one without tests, one
// that panics, one that does not build), interop.json of
// `go test -json -run TestUcmatoseRxe ./tests/interop`.

func run(t *testing.T, file, verbose string) (string, bool) {
	t.Helper()
	in, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var re *regexp.Regexp
	if verbose != "" {
		re = regexp.MustCompile(verbose)
	}
	var out bytes.Buffer
	failed, err := filter(bytes.NewReader(in), &out, re)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), failed
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct{ in, verbose, want string }{
		{"sample.json", "/a$", "sample.want"},
		{"interop.json", "tests/interop$", "interop.want"},
	} {
		got, _ := run(t, tc.in, tc.verbose)
		want, err := os.ReadFile("testdata/" + tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s:\n got:\n%s\nwant:\n%s", tc.in, got, want)
		}
	}
}

// TestWhatShows checks, line by line, that the filter keeps what go test
// prints without -json (closing lines, all of a failure) and drops what
// it hides (passing tests' logs), and that -v adds result lines only for
// the packages it matches.
func TestWhatShows(t *testing.T) {
	quiet, failed := run(t, "sample.json", "")
	if !failed {
		t.Error("failures not reported")
	}
	verbose, _ := run(t, "sample.json", "/a$")
	for _, tc := range []struct {
		line        string
		quiet, verb bool
	}{
		// Closing lines, every package.
		{"FAIL\texample.com/m/a\t", true, true},
		{"ok  \texample.com/m/b\t", true, true},
		{"?   \texample.com/m/c\t[no test files]", true, true},
		{"FAIL\texample.com/m/d\t", true, true},
		{"FAIL\texample.com/m/e [build failed]", true, true},
		// A failing subtest's whole output, and its parent's line.
		{"    a_test.go:10: cell two", true, true},
		{"    a_test.go:12: cell two broke", true, true},
		{"--- FAIL: TestCells/two (", true, true},
		{"--- FAIL: TestCells (", true, true},
		// A panic, with the log before it.
		{"    d_test.go:6: before the panic", true, true},
		{"panic: assignment to entry in nil map", true, true},
		// A build failure.
		{"e/e_test.go:5:28: undefined: undefined", true, true},
		// Passing and skipped tests: a line each with -v, in package a only.
		{"--- PASS: TestCells/one (", false, true},
		{"--- PASS: TestParallel/p2 (", false, true},
		{"--- SKIP: TestSkip (", false, true},
		{"--- PASS: TestB (", false, false},
		// Logs of passing tests never show.
		{"a passing test's log", false, false},
		{"    a_test.go:10: cell one", false, false},
		{"quiet", false, false},
		{"PASS\n", false, false},
	} {
		has := func(out string) bool {
			for _, l := range strings.SplitAfter(out, "\n") {
				if strings.HasPrefix(l, tc.line) || (strings.HasSuffix(tc.line, "\n") && l == tc.line) {
					return true
				}
			}
			return false
		}
		if has(quiet) != tc.quiet {
			t.Errorf("without -v: %q shown %v, want %v", tc.line, !tc.quiet, tc.quiet)
		}
		if has(verbose) != tc.verb {
			t.Errorf("with -v: %q shown %v, want %v", tc.line, !tc.verb, tc.verb)
		}
	}
}

// TestStream checks lines that are not events, and a stream that stops
// inside a package (go test killed): what the package printed shows.
func TestStream(t *testing.T) {
	in := `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestSlow"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"    slow_test.go:9: still going\n"}
`
	var out bytes.Buffer
	failed, err := filter(strings.NewReader(in), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "go: downloading example.com/x v1.0.0\n=== RUN   TestSlow\n    slow_test.go:9: still going\n"
	if out.String() != want || !failed {
		t.Errorf("failed %v, printed:\n%s", failed, out.String())
	}
}
