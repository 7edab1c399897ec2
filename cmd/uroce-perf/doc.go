// Command uroce-perf is perftest for uroce: ib_write_lat, ib_read_lat,
// ib_send_lat, ib_atomic_lat, ib_write_bw, ib_read_bw, ib_send_bw and
// ib_atomic_bw as subcommands, with perftest's flags, its out-of-band TCP exchange
// (package pkg/perftest, byte-compatible with perftest 4.5 and later) and
// its reports, so either side may be a real perftest on an rxe or ConnectX
// host.
//
//	uroce-perf write_lat -d eth0 -s 64 -n 1000            # server
//	uroce-perf write_lat -d eth0 -s 64 -n 1000 10.0.0.1   # client
//	uroce-perf demo                                       # both ends over loopback
//
// Given no peer address a subcommand is the server: it listens on the TCP
// port (-p, 18515) and waits for one client. Given one it is the client,
// which fails at once if nobody listens there, as perftest's does. Both
// may run on one host: a client whose peer is an address of this host
// where a device runs takes another one (samehost.go).
//
// How a run moves. Both sides agree on versions, page size and MTU (Hello),
// then swap the 108-byte QP messages as often as perftest's barriers need
// (sequence.go mirrors perftest's main() of each test, since a single
// missing or extra message deadlocks the pair), connect their QPs, and run
// the measurement loop of the test (bench.go mirrors perftest's
// run_iter_lat_write, run_iter_lat, run_iter_lat_send, run_iter_bw and
// run_iter_bw_server). The engine runs inline: the measuring goroutine
// drives it from CQ.Poll, busy-polling, as perftest does with ibv_poll_cq.
// While a side waits in the exchange (the passive server of read_lat,
// atomic_lat, write_bw and read_bw waits there for the whole test) the
// exchange's connection keeps driving the engine (conn.go), since here the
// engine is the RNIC that must answer the peer.
//
// Flags are perftest's: -s, -n, -a, -m, -x, -d (the network interface),
// -p, -F (accepted; no cycle counter here), --report_gbits, -t, -r, -q,
// -I, -Q, --out_json, --out_json_file, -N, -o (read and atomic tests),
// -u, -V, -i 1 and -S 0 (a uroce device has one port and RoCEv2 no SL),
// --use_old_post_send (accepted; one post path here) and:
//
//   - -A CMP_AND_SWAP or FETCH_AND_ADD (atomic tests; perftest's values:
//     compare 0 and swap 0, or add 1; the banner names it).
//   - -e (--events, --use_event): the loops wait in CQ.Wait instead of
//     polling, as perftest in ibv_get_cq_event; every test takes it.
//   - -D SECONDS (bandwidth tests): run for a time, with -f seconds of
//     warm-up and cool-down (a quarter of -D by default) unmeasured, and
//     report the count and rate of the middle, without a peak, as
//     perftest's duration mode. --run_infinitely repeats a report every
//     -D (5) seconds until interrupted.
//   - -b (bandwidth tests): both sides send; each prints the sum of both
//     reports (send_bw -b -D: its own), as perftest.
//   - -c RC; UC in the write and send tests: no ACKs, a message that lost
//     a packet is lost whole, and the receive depth is the iterations (at
//     most 16000) as perftest sets it; or UD in send_lat and send_bw: UD
//     QPs with perftest's Q_Key 0x11111111, messages of at most one MTU.
//     A UC or UD send_bw server whose messages stop coming reports what
//     came after --timeout.
//
// Every other option of perftest 4.5's and 25.x's (XRC, SRQ, post lists,
// raw Ethernet, GPU memory, rate limits ...) is refused by name,
// "uroce-perf: --foo (perftest's ...) is not supported", and so are the
// combinations perftest refuses, with its reasons (perftestopts.go,
// config.go); the loops of -D, --run_infinitely and send_bw -b are in
// stream.go.
//
// uroce adds --link
// (udp, the default, afpacket or afxdp; AF_XDP busy-polls in latency
// tests), --ip (run on this address instead of -d's first), --timeout
// (give up when the peer stalls) and -stats (print the device's transport
// counters, packets, retransmissions, timeouts and NAKs, on a "counters:"
// line after the report and in --out_json) and --metrics ADDR (serve the
// device's Prometheus metrics, verbs/metrics, at http://ADDR/metrics while
// the test runs; the address is printed on standard error, so standard
// output stays perftest's). A uroce device has one GID, its address; with
// -d IFACE, -x N opens the device on the address at index N of the GID
// table rxe keeps for IFACE (0 the link-local default GID, then the IPv4
// addresses, then the IPv6 ones), so -x names the GID it names on rxe.
// With --ip, -x can only be 0.
//
// The QPs retransmit adaptively and count retries as IBA does: a dead peer
// fails the run after retry count 7's seven retries with perftest's
// report of the failed completion (" Completion with error at client",
// " Failed status 12: wr_id N syndrom 0x0", the scnt and ccnt line) on
// standard error and exit status 1. --fixed_timeout keeps to the IBA local
// ACK timer as rxe does; --retry_forever makes retry count 7 retry forever
// as rxe does.
//
// Selective repeat (resend only what was lost) works between uroce peers
// only. With -R the connection manager negotiates it: on when both ends
// are uroce, never with perftest; --selective_repeat=false turns it off.
// perftest's TCP exchange is byte-exact and has no room to ask the peer
// (every field of its Dest is read and printed), so over TCP both sides
// must give --selective_repeat; one side alone breaks the test's WRITEs.
// It is RC's: UC and UD refuse it. When it is on, the header says
// " Selective repeat: ON" and --out_json's test_info "Selective_repeat".
//
// -R (--rdma_cm) is perftest's: no TCP at all. The QPs are connected by
// the communication manager (package rdmacm, MADs to QP1), and the same
// exchange runs as RC SENDs over one more rdma_cm connection to the same
// port, made first; the QP messages are then perftest's 56-byte binary
// struct instead of the 108-byte text (rdmacm.go).
//
// Reports are computed as perftest does (pkg/perftest: write and send
// latency are half a round trip; the two slowest samples are dropped) and
// printed in its format; --out_json writes them to a file as JSON, with
// perftest's "test_info" and "results" sections and one result per size
// (and uroce's "counters" with -stats).
//
// `uroce-perf bench` (root) is the side-by-side benchmark: it makes two
// namespaces joined by a veth pair (removed on exit and on SIGINT or
// SIGTERM), runs write_lat, read_lat, send_lat (2 B, 64 B, 4 KiB),
// write_bw, read_bw (64 KiB) and the message rate of write_bw and send_bw
// (64 B) over each backend at link MTU 1500 and 9000, and prints one table
// of medians beside the raw floors of package internal/rawbench measured
// in the same run (the RC-shaped AF_XDP ping-pong, the bare AF_XDP and
// kernel UDP ones, AF_XDP blasts), with ratios and steady-state
// allocations per operation (sidebyside.go). Each cell is warmed up
// first, as a virtual machine's first tens of ms after idling run slow:
// a latency test by 4096 untimed iterations in its own loop, a floor's
// ping-pong for 100 ms; the rate cells send 300 000 messages.
//
// The demo runs every test at a few sizes with both ends in one process,
// over UDP on 127.0.0.1 and 127.0.0.2 (port 4791 on each, no privilege
// needed), and then sets write_lat beside a kernel UDP ping-pong of the
// same size between the same addresses.
package main
