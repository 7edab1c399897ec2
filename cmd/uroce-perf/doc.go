// Command uroce-perf is perftest for uroce: ib_write_lat, ib_read_lat,
// ib_send_lat, ib_atomic_lat, ib_write_bw, ib_read_bw and ib_send_bw as
// subcommands, with perftest's flags, its out-of-band TCP exchange
// (package pkg/perftest, byte-compatible with perftest 4.5 and later) and
// its reports, so either side may be a real perftest on an rxe or ConnectX
// host.
//
//	uroce-perf write_lat -d eth0 -s 64 -n 1000            # server
//	uroce-perf write_lat -d eth0 -s 64 -n 1000 10.0.0.1   # client
//	uroce-perf demo                                       # both ends over loopback
//
// Given no peer address a subcommand is the server: it listens on the TCP
// port (-p, 18515) and waits for one client. Given one it is the client.
//
// How a run moves. Both sides agree on versions, page size and MTU (Hello),
// then swap the 108-byte QP messages as often as perftest's barriers need
// (sequence.go mirrors perftest's main() of each test, since a single
// missing or extra message deadlocks the pair), connect their QPs, and run
// the measurement loop of the test (bench.go mirrors perftest's
// run_iter_lat_write, run_iter_lat, run_iter_lat_send, run_iter_bw and
// run_iter_bw_server). The engine runs inline: the measuring goroutine
// drives it from CQ.Poll, busy-polling, as perftest does with ibv_poll_cq.
//
// Reports are computed as perftest does (pkg/perftest: write and send
// latency are half a round trip; the two slowest samples are dropped) and
// printed in its format; --out_json writes them as JSON too.
package main
