// Package lab is the rxe interop lab: real Linux Soft-RoCE peers, booted
// in QEMU from Debian's own kernel and rdma-core packages, on a bridge in
// a throw-away network namespace, for tests that prove uroce against the
// implementation it claims to speak with.
//
// The host kernel has no RDMA support, so each peer is a guest: Debian's
// kernel with rdma_rxe, an initramfs of busybox, rdma-core, perftest,
// rdmacm-utils and iproute2, booted directly (no disk) under QEMU TCG. The
// image is built by build.sh beside this file from apt-get download and
// dpkg -x alone and cached outside the repository, keyed by flavour and
// package versions; BuildImage runs it once per flavour per test process.
//
// Three flavours (Config.Flavour, or $UROCE_LAB_FLAVOUR for every lab that
// names none):
//
//	bookworm          Debian 12: kernel 6.1, rdma-core 44, perftest 4.5 (the default)
//	trixie            Debian 13: kernel 6.12, rdma-core 56, perftest 25.01
//	trixie-backports  trixie with backports' kernel 7.x: AF_XDP zero-copy on virtio-net
//
// Trixie's packages come through a private apt configuration (sources
// list, package lists and cache under the build cache), never the host's.
// New logs the flavour and versions of the image it boots.
//
// The network, per Lab:
//
//	 namespace NS (lab)                                  namespace Peer (uroce)
//	+-----------------------------------------+         +----------------------+
//	| tap g1 --+                              |         |                      |
//	| tap g2 --+-- bridge --- veth -----------+---------+-- veth 10.77.0.1/24  |
//	+-----------------------------------------+         +----------------------+
//
// Guests get 10.77.0.11, .12, ... and MACs 52:54:00:77:00:xx, as in the
// reference captures; rxe0's GID index 1 is their IPv4-mapped RoCEv2 GID.
// All addresses live only inside these namespaces, which t.Cleanup removes
// along with the guests (powered off, then killed by PID if need be).
//
// Commands run in a booted guest as jobs: the host drops a shell script
// into the guest's 9p share, the guest's /init runs it and writes back its
// standard output, standard error and exit status (see guest/init for the
// protocol). Guest.Run waits for one; Guest.Start leaves it running, e.g.
// a perftest server, while the test starts the client elsewhere.
// Guest.Put copies a host file into the share, e.g. a static uroce-perf
// to run in the guest; RemoveRxe and AddRxe take rxe0 and rdma_rxe away
// (freeing UDP port 4791 for another RoCEv2 stack) and bring them back.
//
// Capture records a bridge's frames with an AF_PACKET socket, and
// VerifyRoCE checks that every RoCEv2 packet in them decodes and carries a
// valid ICRC (package bth). DropRoCE adds an nftables rule dropping a
// percentage of RoCE packets crossing the bridge.
//
// Running (as root; -short skips every test that boots a guest):
//
//	bash tests/interop/lab/build.sh [trixie]  # build or find the image; prints its directory
//	go test ./tests/interop/...
//	UROCE_LAB_FLAVOUR=trixie go test ./tests/interop/...
//
// Environment:
//
//	UROCE_LAB_FLAVOUR    bookworm (default), trixie or trixie-backports: the flavour of labs that name none
//	UROCE_LAB_CACHE      the build cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/uroce-lab)
//	UROCE_LAB_IMAGE      a ready image directory: build.sh is not run for its flavour
//	UROCE_LAB_ARTIFACTS  keep consoles, shares and pcaps under this directory
package lab
