// Package interop holds the suites that prove uroce against real Linux
// Soft-RoCE (rdma_rxe) peers in the QEMU lab of package lab.
//
// The rxe-to-rxe tests here prove the lab itself: two guests on the lab's
// bridge run perftest and ibv_rc_pingpong against each other, their
// hw_counters agree with a capture of the bridge whose every RoCEv2 packet
// decodes and verifies with package bth, and with nftables dropping a
// share of RoCE packets the transfers still complete through rxe's
// retransmission. The uroce-perf matrix follows the same pattern, with
// one side of each pair replaced by uroce in the lab's Peer namespace.
//
// The pingpong tests run examples/pingpong in the Peer namespace against
// ibv_rc_pingpong on one guest, each as client and as server, on a clean
// bridge and with 1 % and 5 % of RoCE packets dropped; with -uc against
// ibv_uc_pingpong. TestPerfRxeUC runs perftest's write and send tests
// with -c UC against uroce-perf -c UC. On the Debian 13 guest,
// TestTrixieQuick also runs ATOMIC WRITE between testdata/flushatomic.c,
// built on the host against that release's libibverbs-dev, and uroce's
// internal/flushatomic.
//
// These tests need root (namespaces, taps) and take minutes (TCG guests);
// -short skips them.
package interop
