package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenImage reads the manifests build.sh writes: with a flavour line,
// and from before flavours, when every image was Debian 12's.
func TestOpenImage(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		want           Flavour
		versions       string
	}{
		{"trixie", "flavour trixie\nkernel linux-image-6.12.117+deb13-amd64=6.12.117-1 (6.12.117+deb13-amd64)\n" +
			"package libibverbs1=56.1-1\npackage perftest=25.01.0+0.80-1\nmodule rdma_rxe.ko\n",
			Trixie, "Debian trixie: kernel 6.12.117+deb13-amd64, rdma-core 56.1-1, perftest 25.01.0+0.80-1"},
		{"no flavour line", "kernel linux-image-6.1.0-57-amd64=6.1.192-3 (6.1.0-57-amd64)\npackage libibverbs1=44.0-2\n",
			Bookworm, "Debian bookworm: kernel 6.1.0-57-amd64, rdma-core 44.0-2, perftest ?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{"manifest.txt": tc.manifest, "vmlinuz": "", "initrd.gz": ""} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			img, err := openImage(dir)
			if err != nil {
				t.Fatal(err)
			}
			if img.Flavour != tc.want || img.Versions() != tc.versions || img.Kernel != filepath.Join(dir, "vmlinuz") {
				t.Errorf("flavour %q, versions %q, kernel %s; want %q, %q, vmlinuz", img.Flavour, img.Versions(), img.Kernel, tc.want, tc.versions)
			}
		})
	}
	if _, err := ParseFlavour("sid"); err == nil {
		t.Error("ParseFlavour(sid) succeeded")
	}
}
