package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Image is a built guest image.
type Image struct {
	Dir    string // the image directory in the cache
	Kernel string // Debian's kernel: vmlinux (PVH boot) or else vmlinuz
	Initrd string // the lab's initramfs (gzip'd cpio)
}

var (
	imageOnce sync.Once
	image     *Image
	imageErr  error
)

// BuildTimeout bounds one run of build.sh: a cold build downloads about
// 90 MB of packages, which on a slow mirror can take minutes.
const BuildTimeout = 20 * time.Minute

// BuildImage returns the guest image, building it with build.sh the first
// time a process asks (build.sh itself returns at once when its cache is
// current). $UROCE_LAB_IMAGE, when set, names a ready image directory and
// skips build.sh.
func BuildImage() (*Image, error) {
	imageOnce.Do(func() { image, imageErr = buildImage() })
	return image, imageErr
}

func buildImage() (*Image, error) {
	dir := os.Getenv("UROCE_LAB_IMAGE")
	if dir == "" {
		script, err := buildScript()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "bash", script, "-q")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("lab: %s: %w\n%s", script, err, tail(stderr.String(), 20))
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = lines[len(lines)-1]
	}
	img := &Image{Dir: dir, Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "initrd.gz")}
	if _, err := os.Stat(img.Kernel); err != nil {
		// build.sh found no PVH entry point: boot the bzImage instead.
		img.Kernel = filepath.Join(dir, "vmlinuz")
	}
	for _, f := range []string{img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("lab: image: %w", err)
		}
	}
	return img, nil
}

// buildScript finds build.sh: beside this source file when the test binary
// was built from a work tree (the usual case), else under the module root
// above the working directory (go test runs in the package directory).
func buildScript() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		s := filepath.Join(filepath.Dir(file), "build.sh")
		if _, err := os.Stat(s); err == nil {
			return s, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("lab: find build.sh: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		s := filepath.Join(d, "tests", "interop", "lab", "build.sh")
		if _, err := os.Stat(s); err == nil {
			return s, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("lab: build.sh not found beside the source or under the module root")
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
