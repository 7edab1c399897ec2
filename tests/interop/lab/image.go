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

// Flavour is the Debian release a lab's guests are made of.
type Flavour string

// The flavours build.sh knows.
const (
	// Bookworm is Debian 12: kernel 6.1, rdma-core 44, perftest 4.5.
	Bookworm Flavour = "bookworm"
	// Trixie is Debian 13: kernel 6.12, rdma-core 56, perftest 25.01
	// (which prints version 6.24).
	Trixie Flavour = "trixie"
	// TrixieBackports is trixie's user space on trixie-backports' kernel
	// (7.x), whose virtio-net does AF_XDP zero-copy (GuestConfig.ZeroCopyNIC);
	// its guests also have ethtool.
	TrixieBackports Flavour = "trixie-backports"
)

// FlavourEnv names the environment variable that gives the flavour of
// every lab whose Config leaves Flavour empty; unset, it is Bookworm.
const FlavourEnv = "UROCE_LAB_FLAVOUR"

// DefaultFlavour returns the flavour $UROCE_LAB_FLAVOUR names, or
// Bookworm when it is unset.
func DefaultFlavour() (Flavour, error) {
	v := os.Getenv(FlavourEnv)
	if v == "" {
		return Bookworm, nil
	}
	return ParseFlavour(v)
}

// ParseFlavour checks a flavour's name.
func ParseFlavour(s string) (Flavour, error) {
	switch f := Flavour(s); f {
	case Bookworm, Trixie, TrixieBackports:
		return f, nil
	}
	return "", fmt.Errorf("lab: unknown flavour %q (want %s, %s or %s)", s, Bookworm, Trixie, TrixieBackports)
}

// Image is a built guest image.
type Image struct {
	Dir    string // the image directory in the cache
	Kernel string // Debian's kernel: vmlinux (PVH boot) or else vmlinuz
	Initrd string // the lab's initramfs (gzip'd cpio)

	// From the image's manifest.txt.
	Flavour       Flavour
	KernelPackage string            // e.g. linux-image-6.12.57+deb13-amd64=6.12.57-1
	KernelRelease string            // uname -r in the guest
	Packages      map[string]string // user-space package name → version
}

// Versions says what the image holds, for logs: the flavour, the kernel
// and the versions of rdma-core and perftest.
func (img *Image) Versions() string {
	return fmt.Sprintf("Debian %s: kernel %s, rdma-core %s, perftest %s",
		img.Flavour, img.KernelRelease, img.pkg("libibverbs1", "rdma-core"), img.pkg("perftest", "perftest"))
}

// pkg is the version of the first package of names the image has.
func (img *Image) pkg(names ...string) string {
	for _, n := range names {
		if v, ok := img.Packages[n]; ok {
			return v
		}
	}
	return "?"
}

// readManifest fills in the manifest's fields. An image built before
// flavours existed has no flavour line: it is Bookworm.
func (img *Image) readManifest() error {
	b, err := os.ReadFile(filepath.Join(img.Dir, "manifest.txt"))
	if err != nil {
		return fmt.Errorf("lab: image: %w", err)
	}
	img.Flavour = Bookworm
	img.Packages = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "flavour":
			f, err := ParseFlavour(rest)
			if err != nil {
				return fmt.Errorf("lab: %s: %w", img.Dir, err)
			}
			img.Flavour = f
		case "kernel": // NAME=VERSION (RELEASE)
			pkg, rel, _ := strings.Cut(rest, " ")
			img.KernelPackage = pkg
			img.KernelRelease = strings.Trim(rel, "()")
		case "package": // NAME=VERSION
			if n, v, ok := strings.Cut(rest, "="); ok {
				img.Packages[n] = v
			}
		}
	}
	return nil
}

// images holds one build per flavour per process.
var images sync.Map // Flavour → *imageBuild

type imageBuild struct {
	once sync.Once
	img  *Image
	err  error
}

// BuildTimeout bounds one run of build.sh: a cold build downloads about
// 90 MB of packages, which on a slow mirror can take minutes.
const BuildTimeout = 20 * time.Minute

// BuildImage returns the guest image of flavour f, building it with
// build.sh the first time a process asks for that flavour (build.sh
// itself returns at once when its cache is current).
// $UROCE_LAB_IMAGE, when set, names a ready image directory, used for
// the flavour its manifest names instead of running build.sh.
func BuildImage(f Flavour) (*Image, error) {
	if _, err := ParseFlavour(string(f)); err != nil {
		return nil, err
	}
	v, _ := images.LoadOrStore(f, &imageBuild{})
	b := v.(*imageBuild)
	b.once.Do(func() { b.img, b.err = buildImage(f) })
	return b.img, b.err
}

func buildImage(f Flavour) (*Image, error) {
	if dir := os.Getenv("UROCE_LAB_IMAGE"); dir != "" {
		img, err := openImage(dir)
		if err != nil || img.Flavour == f {
			return img, err
		}
	}
	script, err := buildScript()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "-q", string(f))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("lab: %s %s: %w\n%s", script, f, err, tail(stderr.String(), 20))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	img, err := openImage(lines[len(lines)-1])
	if err == nil && img.Flavour != f {
		err = fmt.Errorf("lab: build.sh %s gave an image of %s (%s)", f, img.Flavour, img.Dir)
	}
	return img, err
}

// openImage checks a ready image directory and reads its manifest.
func openImage(dir string) (*Image, error) {
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
	if err := img.readManifest(); err != nil {
		return nil, err
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
