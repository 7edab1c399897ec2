// Package perftest speaks the out-of-band protocol of the perftest suite
// (ib_write_lat, ib_read_bw and friends) over its TCP connection, and
// computes and prints reports the way perftest does, so that uroce's
// benchmark and a real perftest on an rxe or ConnectX host can face each
// other.
//
// The exchange is a sequence of fixed-size messages. In each step the
// client writes first and then reads the server's message of the same
// size; the server reads first and then writes (perftest's
// ctx_xchg_data). The steps are: the 16-byte version string, the page size
// and cache line size as big-endian ints, the MTU enum as decimal text, then
// the 108-byte "lid:out_reads:qpn:psn:rkey:vaddr:gid:srqn:" message
// (Dest) as often as the test's barriers need, bandwidth reports in bw
// tests, and "done" before closing.
//
// Version negotiation: perftest 6.28 and later exchange an extra binary
// block of test parameters and the device attributes (ibv_device_attr, its
// size fixed by how perftest was built) when, and only when, the peer
// announces 6.28 or later. uroce announces Version, "6.06" as Debian 12's
// perftest 4.5 does, so new and old perftest alike skip that block and the
// exchange stays the same well-defined byte sequence with both.
package perftest
