package bpf

// The generated uroce_bpfel.go and uroce_bpfel.o are committed, so building
// the module needs no clang. To regenerate (needs clang, llvm and
// libbpf-dev; on Debian: apt-get install -y clang llvm libbpf-dev):
//
//	go generate ./bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" uroce xdp.c
