package layers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/uroce/uroce"

// pkg is what the rules read of `go list -json`. Path is relative to the
// module ("qp", "pkg/link/udp"); the lists hold full import paths.
type pkg struct {
	Path         string   // import path within the module
	Imports      []string // the package's own imports (a std package imports only std)
	Deps         []string // all it depends on, transitively, tests aside
	TestImports  []string // imports of its in-package tests
	XTestImports []string // imports of its external (_test) package
	Err          string   // go list's error for the package, such as a cycle
}

// lower lists the packages below verbs, by prefix: the engine, the wire
// format, congestion control, links and what they use (network emulation,
// routes, histograms), the kernel-bypass sockets and the CM's state
// machines.
var lower = []string{"qp", "cc", "bth", "pkg/link", "pkg/netinfo", "pkg/hist", "pkg/netem", "xdp", "bpf", "pkg/cm"}

// stdlibOnly lists the packages that import the standard library alone.
var stdlibOnly = []string{"bth", "cc"}

// under reports whether path is prefix or inside it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func isLower(path string) bool {
	return slices.ContainsFunc(lower, func(p string) bool { return under(path, p) })
}

// isStd reports whether an import path is the standard library's: its
// first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && path != "C"
}

// ours returns an import path relative to the module, and whether it is
// the module's at all.
func ours(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// anyOurs reports whether any of paths is one of the module's packages
// that match.
func anyOurs(paths []string, match func(string) bool) bool {
	return slices.ContainsFunc(paths, func(p string) bool {
		r, ok := ours(p)
		return ok && match(r)
	})
}

// isUpper reports whether a package is verbs or one of those above it
// that a lower package could name: verbs' own sub-packages, programs and
// suites. (Any other package above verbs imports verbs, so a lower
// package importing it has verbs among its Deps.)
func isUpper(path string) bool {
	for _, p := range []string{"verbs", "pkg/rdmacm", "cmd", "examples", "tests"} {
		if under(path, p) {
			return true
		}
	}
	return false
}

// check returns every broken rule, one line each.
func check(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		if strings.Contains(p.Err, "import cycle") {
			bad = append(bad, fmt.Sprintf("%s: %s", p.Path, p.Err))
		}
	}
	for _, p := range pkgs {
		// 1. bth and cc import only the standard library.
		if slices.Contains(stdlibOnly, p.Path) {
			for _, d := range p.Imports {
				if !isStd(d) {
					if r, ok := ours(d); ok {
						d = r
					}
					bad = append(bad, fmt.Sprintf("%s imports %s: it may import only the standard library", p.Path, d))
				}
			}
		}
		// 2. Nothing below verbs imports verbs or anything above it,
		// directly, through another package, or in its in-package tests
		// (which go reports, as a cycle, only when it builds them).
		if isLower(p.Path) {
			for _, d := range slices.Concat(p.Deps, p.TestImports) {
				if r, ok := ours(d); ok && isUpper(r) {
					bad = append(bad, fmt.Sprintf("%s (below verbs) depends on %s", p.Path, r))
				}
			}
		}
		// 3. Only verbs imports qp, besides qp's own tests: the API
		// re-exports what a program needs.
		if !under(p.Path, "qp") && p.Path != "verbs" {
			isQP := func(r string) bool { return under(r, "qp") }
			if anyOurs(slices.Concat(p.Imports, p.TestImports, p.XTestImports), isQP) {
				bad = append(bad, fmt.Sprintf("%s imports qp: use verbs", p.Path))
			}
		}
	}
	// 4. No cycles, counting in-package tests' imports (go build reports
	// those only when the tests are built).
	bad = append(bad, cycles(pkgs)...)
	return bad
}

// cycles finds import cycles among the module's packages over their
// imports and their in-package tests' imports.
func cycles(pkgs []pkg) []string {
	edges := map[string][]string{}
	for _, p := range pkgs {
		for _, i := range slices.Concat(p.Imports, p.TestImports) {
			if r, ok := ours(i); ok {
				edges[p.Path] = append(edges[p.Path], r)
			}
		}
		if edges[p.Path] == nil {
			edges[p.Path] = []string{}
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var stack []string
	var bad []string
	var visit func(string)
	visit = func(n string) {
		state[n] = onPath
		stack = append(stack, n)
		for _, m := range edges[n] {
			if _, known := edges[m]; !known || m == n {
				continue
			}
			switch state[m] {
			case unseen:
				visit(m)
			case onPath:
				i := slices.Index(stack, m)
				bad = append(bad, "import cycle: "+strings.Join(append(slices.Clone(stack[i:]), m), " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, p := range pkgs {
		if state[p.Path] == unseen {
			visit(p.Path)
		}
	}
	return bad
}

// list runs go list over the whole module.
func list(t *testing.T) []pkg {
	t.Helper()
	// go test puts its own go first on the PATH of the tests it runs.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,TestImports,XTestImports,Error", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var j struct {
			ImportPath                               string
			Imports, Deps, TestImports, XTestImports []string
			Error                                    *struct{ Err string }
		}
		if err := dec.Decode(&j); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		path, ok := ours(j.ImportPath)
		if !ok {
			t.Fatalf("go list: %s is not in %s", j.ImportPath, module)
		}
		p := pkg{Path: path, Imports: j.Imports, Deps: j.Deps, TestImports: j.TestImports, XTestImports: j.XTestImports}
		if j.Error != nil {
			p.Err = j.Error.Err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayers checks the module as it is.
func TestLayers(t *testing.T) {
	pkgs := list(t)
	// The rules name packages by path: fail if one they lean on is gone,
	// rather than check nothing.
	for _, want := range []string{"bth", "cc", "qp", "verbs", "pkg/link", "pkg/cm", "xdp", "bpf"} {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.Path == want }) {
			t.Errorf("package %s not found: update the rules to the new layout", want)
		}
	}
	for _, b := range check(pkgs) {
		t.Error(b)
	}
}

// TestRulesCatch feeds the rules a module that breaks each of them once.
func TestRulesCatch(t *testing.T) {
	// u names the module's packages by their relative paths.
	u := func(paths ...string) []string {
		for i, p := range paths {
			paths[i] = module + "/" + p
		}
		return paths
	}
	good := func() []pkg {
		return []pkg{
			{Path: "bth", Imports: []string{"errors"}, Deps: []string{"errors", "internal/abi"}},
			{Path: "cc", Imports: []string{"time"}, Deps: []string{"time"}},
			{Path: "qp", Imports: u("bth", "cc"), Deps: append(u("bth", "cc"), "errors", "time")},
			{Path: "verbs", Imports: u("qp"), Deps: u("qp", "bth", "cc"), XTestImports: u("qp", "verbs")},
			{Path: "pkg/rdmacm", Imports: u("verbs"), Deps: u("verbs", "qp", "bth", "cc")},
		}
	}
	if bad := check(good()); len(bad) != 0 {
		t.Fatalf("a good module breaks rules: %q", bad)
	}
	for _, c := range []struct {
		name string
		edit func(m []pkg) []pkg
		want string
	}{
		{"bth imports a module", func(m []pkg) []pkg {
			m[0].Imports = append(m[0].Imports, "github.com/google/gopacket")
			return m
		}, "bth imports github.com/google/gopacket: it may import only the standard library"},
		{"cc imports one of ours", func(m []pkg) []pkg { m[1].Imports = append(m[1].Imports, u("pkg/hist")...); return m },
			"cc imports pkg/hist"},
		{"qp imports verbs", func(m []pkg) []pkg { m[2].Deps = append(m[2].Deps, u("verbs")...); return m },
			"qp (below verbs) depends on verbs"},
		{"a link imports rdmacm", func(m []pkg) []pkg {
			return append(m, pkg{Path: "pkg/link/udp", Imports: u("pkg/rdmacm"), Deps: u("pkg/rdmacm", "verbs")})
		}, "pkg/link/udp (below verbs) depends on pkg/rdmacm"},
		{"the CM imports verbs/metrics", func(m []pkg) []pkg {
			return append(m, pkg{Path: "pkg/cm", Imports: u("verbs/metrics"), Deps: u("verbs/metrics")})
		}, "pkg/cm (below verbs) depends on verbs/metrics"},
		{"qp's test imports verbs", func(m []pkg) []pkg { m[2].TestImports = u("verbs"); return m },
			"qp (below verbs) depends on verbs"},
		{"rdmacm imports qp", func(m []pkg) []pkg { m[4].Imports = append(m[4].Imports, u("qp")...); return m },
			"pkg/rdmacm imports qp"},
		{"an example's test imports qp", func(m []pkg) []pkg {
			return append(m, pkg{Path: "examples/pingpong", Imports: u("verbs"), XTestImports: u("qp")})
		}, "examples/pingpong imports qp"},
		{"a cycle through a test", func(m []pkg) []pkg {
			return append(m, pkg{Path: "pkg/a", Imports: u("pkg/b")}, pkg{Path: "pkg/b", TestImports: u("pkg/a")})
		}, "import cycle: pkg/a -> pkg/b -> pkg/a"},
		{"go list's cycle", func(m []pkg) []pkg {
			return append(m, pkg{Path: "pkg/c", Err: "import cycle not allowed"})
		}, "pkg/c: import cycle not allowed"},
	} {
		bad := check(c.edit(good()))
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, c.want) }) {
			t.Errorf("%s: rules say %q, want a line with %q", c.name, bad, c.want)
		}
	}
}
