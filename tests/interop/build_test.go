package interop_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// buildDir holds the programs built once per test binary (see buildOnce);
// TestMain removes it.
var (
	buildDir     string
	buildDirOnce sync.Once
	buildDirErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var builds sync.Map // package path → *build

type build struct {
	once sync.Once
	bin  string
	err  error
}

// buildOnce builds the command at pkg (e.g. github.com/uroce/uroce/cmd/uroce-perf)
// the first time a test asks for it and returns its path: the matrices of
// both MTUs run the same binary, and a build on a loaded machine is not free.
func buildOnce(t *testing.T, pkg string) string {
	t.Helper()
	return buildCached(t, pkg, false)
}

// buildStatic is buildOnce for a program that runs in a lab guest, whose
// initramfs has Debian's libc but not necessarily the host's: a static
// binary (CGO_ENABLED=0) runs there as it is.
func buildStatic(t *testing.T, pkg string) string {
	t.Helper()
	return buildCached(t, pkg, true)
}

func buildCached(t *testing.T, pkg string, static bool) string {
	t.Helper()
	key, name := pkg, filepath.Base(pkg)
	if static {
		key, name = "static:"+pkg, name+"-static"
	}
	v, _ := builds.LoadOrStore(key, &build{})
	b := v.(*build)
	b.once.Do(func() {
		buildDirOnce.Do(func() { buildDir, buildDirErr = os.MkdirTemp("", "uroce-interop-") })
		if b.err = buildDirErr; b.err != nil {
			return
		}
		b.bin = filepath.Join(buildDir, name)
		cmd := exec.Command("go", "build", "-o", b.bin, pkg)
		if static {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}
