package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// verb is the operation a test measures (perftest's VerbType).
type verb int

const (
	verbWrite verb = iota
	verbRead
	verbSend
	verbAtomic
)

// kind is one of the eight tests.
type kind struct {
	name  string // subcommand: write_lat ...
	title string // perftest's banner: "RDMA_Write Latency Test"
	verb  verb
	bw    bool
}

var kinds = []kind{
	{"write_lat", "RDMA_Write Latency Test", verbWrite, false},
	{"read_lat", "RDMA_Read Latency Test", verbRead, false},
	{"send_lat", "Send Latency Test", verbSend, false},
	{"atomic_lat", "Atomic FETCH_AND_ADD Latency Test", verbAtomic, false},
	{"write_bw", "RDMA_Write BW Test", verbWrite, true},
	{"read_bw", "RDMA_Read BW Test", verbRead, true},
	{"send_bw", "Send BW Test", verbSend, true},
	{"atomic_bw", "Atomic FETCH_AND_ADD BW Test", verbAtomic, true},
}

// Atomic operations of -A, named as perftest's atomicTypesStr.
const (
	atomicCmpSwap  = "CMP_AND_SWAP"
	atomicFetchAdd = "FETCH_AND_ADD"
)

func kindByName(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

// roundTrip says whether a latency sample is a round trip, halved in the
// report (perftest: write and send ping-pong; read and atomic are one
// request and its response).
func (k kind) roundTrip() bool { return k.verb == verbWrite || k.verb == verbSend }

// outReads is the initiator depth offered in the Dest message: perftest
// sends 1 for write and send, and the device's max_qp_rd_atom for read and
// atomic (0x80 on rxe, which is what the captures show).
func (k kind) outReads() uint16 {
	if k.verb == verbRead || k.verb == verbAtomic {
		return 0x80
	}
	return 1
}

// outReads is the initiator depth this side offers in its Dest message:
// the kind's, or -o's, at most the 128 of rxe's max_qp_rd_atom, as
// perftest's ctx_set_out_reads takes the smaller of the two.
func (c *config) outReads() uint16 {
	if c.outs > 0 && (c.kind.verb == verbRead || c.kind.verb == verbAtomic) {
		return uint16(min(c.outs, 0x80))
	}
	return c.kind.outReads()
}

// printHelp prints fs's flags as -h lists them, leaving out perftest's
// options that are only known by name (perftestopts.go).
func printHelp(fs *flag.FlagSet, w io.Writer) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !isRefused(f) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.PrintDefaults()
	fmt.Fprintln(w, "\nperftest 4.5's and 25.x's other options are refused by name, as not supported.")
}

// Errors of the command line and of a run.
var (
	// ErrUsage means the command line does not describe a test.
	ErrUsage = errors.New("usage")
	// ErrStalled means the peer stopped answering for longer than
	// --timeout (a failure detector, not a measurement).
	ErrStalled = errors.New("no progress")
	// ErrCompletion means a work request completed with an error status.
	ErrCompletion = errors.New("work completion error")
)

// wcError is a work request that completed with an error status: a dead
// peer's IBV_WC_RETRY_EXC_ERR, a remote access error. The command reports
// it in perftest's words (perftest_resources.h's NOTIFY_COMP_ERROR_SEND
// and NOTIFY_COMP_ERROR_RECV) and fails.
type wcError struct {
	wc verbs.WC
	// recv: it came from the receive CQ, which perftest reports as the
	// server's; a send completion it reports as the client's.
	recv bool
	// scnt and ccnt are the WRs posted and completed (for recv, scnt is
	// the receives completed), as perftest prints them.
	scnt, ccnt int
}

func (e *wcError) Error() string {
	return fmt.Sprintf("%v: %v on %v (QPN %#x)", ErrCompletion, e.wc.Status, e.wc.Opcode, e.wc.QPN)
}

func (e *wcError) Unwrap() error { return ErrCompletion }

// perftest returns perftest's lines for the failure. The syndrome is the
// vendor error, which uroce, like rxe, leaves 0.
func (e *wcError) perftest() string {
	if e.recv {
		return fmt.Sprintf(" Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d\n",
			int(e.wc.Status), int(e.wc.WRID), 0, e.scnt)
	}
	return fmt.Sprintf(" Completion with error at client\n Failed status %d: wr_id %d syndrom 0x%x\nscnt=%d, ccnt=%d\n",
		int(e.wc.Status), int(e.wc.WRID), 0, e.scnt, e.ccnt)
}

// config is one side's test parameters; flags and defaults are perftest's.
type config struct {
	kind kind
	peer string // empty: server
	// warm is how many untimed iterations a latency test runs before
	// its timed ones, on both sides alike (uroce-perf bench sets it; no
	// perftest option does). A multiple of 256: write_lat tells
	// iterations apart by their number's low byte.
	warm int
	// events (-e) waits for completions in CQ.Wait, perftest's
	// ibv_get_cq_event, instead of busy-polling.
	events bool
	// duration (-D, seconds) runs a bandwidth test for a time instead of
	// -n iterations: a warm-up and a cool-down of margin seconds (-f,
	// perftest's default a quarter of it) around the measured middle.
	duration int
	margin   int
	// runInf (--run_infinitely) repeats a bandwidth report every
	// duration seconds (5 by default, perftest's DEF_DURATION) until the
	// command is interrupted.
	runInf bool
	// maxReports, when set, ends --run_infinitely after that many
	// reports, as if the duration ended (tests).
	maxReports int
	// interrupt, when set, stands for SIGINT in --run_infinitely (tests).
	interrupt chan os.Signal
	// udMax, with -c UD once the MTU is settled, is the largest
	// message: one MTU.
	udMax int
	// noPeak (-N) reports no peak bandwidth.
	noPeak bool
	// ibPort (-i), sl (-S): a uroce device has one port and RoCEv2 no
	// service level; perftest's defaults are accepted.
	ibPort, sl int
	// qpTimeout (-u) is the local ACK timeout exponent (IBA 11.2.4.2);
	// outs (-o), when set, the initiator depth offered.
	qpTimeout, outs int
	// bidir (-b) has both sides send at once.
	bidir bool
	// atomic is -A's operation (atomic tests): FETCH_AND_ADD, perftest's
	// default, or CMP_AND_SWAP.
	atomic string
	size   int
	iters  int
	all    bool
	mtu    int
	gidIdx int
	// gidSet: -x was given. With -d and no --ip it then picks the local
	// address from rxe's GID table of the interface (localAddr), and
	// gidMapped says it did: the device opened on that address has it
	// as its one GID, at index 0 (deviceGID).
	gidSet, gidMapped bool
	dev               string
	ip                string
	port              int
	gbits             bool
	conn              string
	tx                int
	rx                int
	qps               int
	inline            int
	cqMod             int
	link              string
	json              bool
	jsonTo            string
	// stats prints the device's transport counters after the report
	// (and puts them in --out_json), for tests that check a peer's
	// retransmissions against their own.
	stats bool
	// sizeList, when set, replaces -s and -a's sizes (the demo); it
	// runs like -a.
	sizeList []int
	// timeout is the stall detector's limit, never a measurement.
	timeout time.Duration
	// metrics, when set, is where /metrics is served during the test
	// (metrics.go); metricsDone, when set, is called at the end, while
	// the server still serves (tests).
	metrics     string
	metricsDone func(*metrics.Server)
	// rdmaCM (-R) connects the QPs by rdma_cm and runs the exchange
	// over it instead of TCP (rdmacm.go).
	rdmaCM bool
	// notice, when set, is where a client says that its server has not
	// answered yet (standard error; standard output is perftest's).
	notice io.Writer
	// fixedTimeout keeps the QPs to the IBA local ACK timer rather than
	// adaptive retransmission; retryForever makes retry count 7 retry
	// forever, as rxe does, rather than fail after seven retries.
	fixedTimeout, retryForever bool
	// selective (--selective_repeat) asks for selective repeat between
	// uroce peers: over TCP both sides must give it, since perftest's
	// exchange has no room to ask the peer; with -R rdma_cm negotiates it
	// anyway, and selectiveSet with selective false turns that off.
	// srUsed says whether the test's QPs got it, for the header.
	selective, selectiveSet, srUsed bool
	// xdpBind (--xdp_bind) is how --link afxdp binds its sockets;
	// bindUsed is what it got ("zero-copy" or "copy"), printed in the
	// header, empty for the other links.
	xdpBind  string
	bindUsed string
}

// bindMode returns --xdp_bind's mode, auto when not given.
func (c *config) bindMode() (link.BindMode, error) {
	if c.xdpBind == "" {
		return link.BindAuto, nil
	}
	m, err := link.ParseBindMode(c.xdpBind)
	if err != nil {
		return 0, fmt.Errorf("%w: --xdp_bind: %v", ErrUsage, err)
	}
	if c.link != "afxdp" {
		return 0, fmt.Errorf("%w: --xdp_bind is for --link afxdp, not %s", ErrUsage, c.link)
	}
	return m, nil
}

// retrans returns the QPs' retransmission flags.
func (c *config) retrans() verbs.RetransFlags {
	var f verbs.RetransFlags
	if c.fixedTimeout {
		f |= verbs.RetransFixed
	}
	if c.retryForever {
		f |= verbs.RetransRetry7Forever
	}
	// With -R the CM decides selective repeat (cmSide.params.GoBackN).
	if c.selective && !c.rdmaCM {
		f |= verbs.RetransSelective
	}
	return f
}

// allSizes are the sizes of -a: 2 B to 8 MiB, as perftest's RUN_ALL loop
// (1 << i for i in 1..23).
func allSizes() []int {
	s := make([]int, 0, 23)
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}

func (c *config) sizes() []int {
	if c.sizeList != nil {
		return c.sizeList
	}
	if c.udMax > 0 {
		// perftest's UD runs sizes up to the MTU, and cuts a larger
		// -s to it.
		if c.all {
			return slices.DeleteFunc(allSizes(), func(s int) bool { return s > c.udMax })
		}
		return []int{min(c.size, c.udMax)}
	}
	if c.all {
		return allSizes()
	}
	return []int{c.size}
}

// title is the banner's test name as perftest's ctx_print_test_info
// composes it: the verb, the atomic operation, then BW or Latency.
func (c *config) title() string {
	t := c.kind.title
	if c.kind.verb == verbAtomic {
		t = strings.Replace(t, atomicFetchAdd, c.atomic, 1)
	}
	if c.bidir {
		t = strings.Replace(t, " BW Test", " Bidirectional BW Test", 1)
	}
	return t
}

func (c *config) maxSize() int { return max(slices.Max(c.sizes()), c.size) }

// errHelp is parseArgs' answer to -h, --help: it printed the test's
// usage and the command ends with status 0, as perftest's usage() is
// printed on standard output.
var errHelp = errors.New("help printed")

// parseArgs reads a subcommand's arguments. Like perftest's getopt_long it
// takes the peer address anywhere among the flags. Given -h it prints the
// test's usage to helpOut and returns errHelp.
func parseArgs(k kind, args []string, helpOut io.Writer) (*config, error) {
	c := &config{kind: k}
	fs := flag.NewFlagSet("uroce-perf "+k.name, flag.ContinueOnError)
	// The flag package would print an error and the whole usage on its
	// own; the caller prints the error, once, and -h prints the usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defIters, defSize, defTx, defInline := 1000, 2, 1, 220
	if k.bw {
		defIters, defSize, defTx, defInline = 5000, 65536, 128, 0
	}
	if k.verb == verbAtomic {
		defSize = 8
	}
	intVar := func(p *int, short, long string, def int, usage string) {
		fs.IntVar(p, short, def, usage)
		fs.IntVar(p, long, def, "same as -"+short)
	}
	strVar := func(p *string, short, long, def, usage string) {
		fs.StringVar(p, short, def, usage)
		fs.StringVar(p, long, def, "same as -"+short)
	}
	intVar(&c.size, "s", "size", defSize, "message size in bytes")
	intVar(&c.iters, "n", "iters", defIters, "iterations")
	fs.BoolVar(&c.all, "a", false, "run sizes 2 B to 8 MiB")
	fs.BoolVar(&c.all, "all", false, "same as -a")
	intVar(&c.mtu, "m", "mtu", 0, "IB MTU in bytes (256..4096); 0 means the largest the link carries")
	intVar(&c.gidIdx, "x", "gid-index", 0, "GID index in rxe's table of -d's interface (0 the link-local address, then IPv4, then other IPv6 addresses); the local address when --ip is not given")
	strVar(&c.dev, "d", "ib-dev", "", "device: the network interface to run on")
	fs.StringVar(&c.ip, "ip", "", "local IP address to run on (instead of -d's first address)")
	intVar(&c.port, "p", "port", perftest.DefaultPort, "TCP port of the out-of-band exchange")
	var cpuFreq bool
	// -F: perftest's "don't fail on CPU frequency warnings"; uroce's clock
	// is the monotonic nanosecond clock, so there is nothing to warn about.
	fs.BoolVar(&cpuFreq, "F", false, "accepted for perftest compatibility (no cycle counter here)")
	fs.BoolVar(&cpuFreq, "CPU-freq", false, "same as -F")
	fs.BoolVar(&c.gbits, "report_gbits", false, "report bandwidth in Gb/s instead of MB/s (2^20 bytes, as perftest)")
	strVar(&c.conn, "c", "connection", "RC", "connection type: RC, UC (write and send tests), or UD (send_lat, send_bw)")
	intVar(&c.tx, "t", "tx-depth", defTx, "send queue depth")
	intVar(&c.rx, "r", "rx-depth", 512, "receive queue depth (send tests)")
	intVar(&c.qps, "q", "qp", 1, "number of QPs")
	intVar(&c.inline, "I", "inline_size", defInline, "largest message sent inline")
	intVar(&c.cqMod, "Q", "cq-mod", 100, "signal one send in this many (bw tests)")
	intVar(&c.duration, "D", "duration", 0, "run bandwidth tests for this many seconds instead of -n iterations")
	intVar(&c.margin, "f", "margin", -1, "with -D: seconds of warm-up and cool-down, unmeasured (default a quarter of -D)")
	fs.BoolVar(&c.runInf, "run_infinitely", false, "repeat the bandwidth report every -D seconds (5 unless given) until interrupted")
	fs.BoolVar(&c.bidir, "b", false, "bidirectional: both sides send (bw tests)")
	fs.BoolVar(&c.bidir, "bidirectional", false, "same as -b")
	strVar(&c.atomic, "A", "atomic_type", atomicFetchAdd, "atomic operation of the atomic tests: "+atomicCmpSwap+" or "+atomicFetchAdd)
	// perftest 4.5 and 25.01 spell it -e and --events; --use_event is
	// its parameter's name, which users type too.
	fs.BoolVar(&c.events, "e", false, "wait for completion events instead of polling the CQ")
	fs.BoolVar(&c.events, "events", false, "same as -e")
	fs.BoolVar(&c.events, "use_event", false, "same as -e")
	fs.StringVar(&c.link, "link", link.Default, "link backend: "+strings.Join(link.Backends(), ", "))
	fs.StringVar(&c.xdpBind, "xdp_bind", "", "with --link afxdp: `mode` auto (zero-copy if the driver offers it), copy or zero-copy (fail without it)")
	fs.BoolVar(&c.json, "out_json", false, "also write the results as JSON")
	fs.StringVar(&c.jsonTo, "out_json_file", "perftest_out.json", "file for --out_json (- is standard output)")
	fs.BoolVar(&c.stats, "stats", false, "print the transport counters (packets, retransmissions, NAKs) after the report")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "give up when the peer makes no progress for this long")
	fs.BoolVar(&c.fixedTimeout, "fixed_timeout", false, "retransmit on the IBA local ACK timer (4.096 µs × 2^14) alone, as rxe does, not adaptively")
	fs.BoolVar(&c.retryForever, "retry_forever", false, "retry count 7 retries forever, as rxe does; by default a dead peer fails after 7 retries (IBV_WC_RETRY_EXC_ERR)")
	fs.BoolVar(&c.selective, "selective_repeat", false, "selective repeat (resend only lost packets), only between uroce peers: over TCP both sides must give it; with -R rdma_cm negotiates it, =false turns it off")
	fs.BoolVar(&c.rdmaCM, "R", false, "connect QPs with rdma_cm and run the exchange over it instead of TCP")
	fs.BoolVar(&c.rdmaCM, "rdma_cm", false, "same as -R")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics at http://`addr`/metrics during the test, e.g. :9090")
	var version, oldPostSend bool
	fs.BoolVar(&version, "V", false, "print the perftest version uroce-perf announces, and exit")
	fs.BoolVar(&version, "version", false, "same as -V")
	fs.BoolVar(&c.noPeak, "N", false, "no peak bandwidth (bw tests): report it as 0")
	fs.BoolVar(&c.noPeak, "noPeak", false, "same as -N")
	intVar(&c.ibPort, "i", "ib-port", 1, "port of the device (a uroce device has one: 1)")
	intVar(&c.sl, "S", "sl", 0, "service level (0 only: RoCEv2 carries none)")
	intVar(&c.qpTimeout, "u", "qp-timeout", 14, "local ACK timeout, 4.096 µs × 2^value (1..31)")
	intVar(&c.outs, "o", "outs", 0, "outstanding reads and atomics offered (read and atomic tests; default 128, rxe's max_qp_rd_atom)")
	// --use_old_post_send picks ibv_post_send over perftest's ibv_wr_*
	// API; uroce-perf has one post path, so it changes nothing.
	fs.BoolVar(&oldPostSend, "use_old_post_send", false, "accepted for perftest compatibility (one post path here)")
	var refused []string
	registerRefused(fs, &refused)
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(helpOut, "usage: uroce-perf %s [flags] [peer]   (no peer: the server)\n\nFlags, as perftest's ib_%s where it has them:\n", k.name, k.name)
			printHelp(fs, helpOut)
			return nil, errHelp
		} else if err != nil {
			return nil, fmt.Errorf("%w: %v (uroce-perf %s -h lists the flags)", ErrUsage, err, k.name)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if c.peer != "" {
			return nil, fmt.Errorf("%w: more than one peer (%q, %q)", ErrUsage, c.peer, args[0])
		}
		c.peer, args = args[0], args[1:]
	}
	if len(refused) > 0 {
		return nil, refusedError(fs, refused)
	}
	if version {
		fmt.Fprintf(helpOut, "Version: %s\n", perftest.Version)
		return nil, errHelp
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (set["o"] || set["outs"]) && k.verb != verbRead && k.verb != verbAtomic {
		return nil, fmt.Errorf("%w: -o: setting outstanding reads is only available in read and atomic tests", ErrUsage)
	}
	c.udDefaults(set)
	c.selectiveSet = set["selective_repeat"]
	c.gidSet = set["x"] || set["gid-index"]
	return c, c.check()
}

// deviceGID is the index in the opened device's own GID table that -x
// stands for: 0 when -x chose the device's address (a uroce device has one
// GID, its address), else -x itself.
func (c *config) deviceGID() int {
	if c.gidMapped {
		return 0
	}
	return c.gidIdx
}

// durationMode says whether the test runs for a time (-D or
// --run_infinitely) rather than for -n iterations.
func (c *config) durationMode() bool { return c.duration > 0 || c.runInf }

// cqModUsed is the CQ moderation the bandwidth loops use: perftest lowers
// -Q to the send queue's depth and, counting iterations, to their number.
func (c *config) cqModUsed() int {
	if c.durationMode() {
		return min(c.cqMod, c.tx)
	}
	return min(c.cqMod, c.tx, c.iters)
}

// bidirSend says whether both sides send SENDs and receive them: send_bw
// with -b (perftest's run_iter_bi).
func (c *config) bidirSend() bool { return c.bidir && c.kind.verb == verbSend }

// phase is where a duration-mode test stands.
type phase int

const (
	phaseWarmUp phase = iota
	phaseSample
	phaseCoolDown
	phaseEnd
)

// phaseAt is perftest's catch_alarm states at elapsed since the start:
// margin seconds of warm-up, duration-2*margin measured, margin of
// cool-down.
func (c *config) phaseAt(elapsed time.Duration) phase {
	m, d := time.Duration(c.margin)*time.Second, time.Duration(c.duration)*time.Second
	switch {
	case elapsed < m:
		return phaseWarmUp
	case elapsed < d-m:
		return phaseSample
	case elapsed < d:
		return phaseCoolDown
	}
	return phaseEnd
}

// checkModes checks -D, --run_infinitely, -b and -e against each other
// with perftest's words (force_dependecies), and sets -D's defaults.
func (c *config) checkModes() error {
	if c.runInf && c.duration == 0 {
		c.duration = 5 // perftest's DEF_DURATION
	}
	if c.margin < 0 {
		c.margin = c.duration / 4
	}
	switch {
	case c.duration < 0:
		return fmt.Errorf("%w: -D %d: the duration must be positive", ErrUsage, c.duration)
	case c.bidir && !c.kind.bw:
		return fmt.Errorf("%w: -b: bidirectional is only available in BW tests", ErrUsage)
	case c.runInf && !c.kind.bw:
		return fmt.Errorf("%w: --run_infinitely exists only in BW tests", ErrUsage)
	case c.duration > 0 && !c.kind.bw:
		// perftest 4.5 and 25.01 have a duration mode in their latency
		// tests (run_iter_lat_duration); uroce's latency loops count
		// iterations only.
		return &unsupportedError{"-D (perftest's duration mode) is not supported in latency tests: use -n"}
	case c.runInf && c.events:
		return fmt.Errorf("%w: --run_infinitely does not support events (-e)", ErrUsage)
	case c.runInf && c.bidirSend():
		return fmt.Errorf("%w: --run_infinitely is not supported in the SEND bidirectional BW test", ErrUsage)
	case c.durationMode() && c.events:
		return fmt.Errorf("%w: duration mode (-D) doesn't work with events (-e)", ErrUsage)
	case c.durationMode() && c.all:
		return fmt.Errorf("%w: duration mode (-D) doesn't support running on all sizes (-a)", ErrUsage)
	case c.durationMode() && c.duration <= 2*c.margin:
		return fmt.Errorf("%w: -D %d -f %d: the duration must be more than twice the margin", ErrUsage, c.duration, c.margin)
	}
	return nil
}

// udQKey is the Q_Key of perftest's UD QPs (DEF_QKEY), on both ends.
const udQKey = 0x11111111

// ud says whether the test runs on UD QPs (-c UD).
func (c *config) ud() bool { return strings.EqualFold(c.conn, "UD") }

// uc says whether the test runs on UC QPs (-c UC).
func (c *config) uc() bool { return strings.EqualFold(c.conn, "UC") }

// unreliable says whether a message may be lost for good (UD, UC): a
// receiver that waits in vain then reports what came, as perftest's
// check_alive does.
func (c *config) unreliable() bool { return c.ud() || c.uc() }

// checkConn checks -c against the connection types perftest names.
func (c *config) checkConn() error {
	switch t := strings.ToUpper(c.conn); t {
	case "RC", "UC", "UD":
		return nil
	case "XRC", "DC", "SRD", "RAWETH":
		return &unsupportedError{fmt.Sprintf("-c %s (perftest's connection type %s) is not supported: uroce-perf runs RC, UC in write and send tests, and UD in send_lat and send_bw", c.conn, t)}
	default:
		return fmt.Errorf("%w: connection type %s: invalid, choose from {RC,UC,UD,XRC,DC,SRD}", ErrUsage, c.conn)
	}
}

// udDefaults applies perftest's UD defaults where the command line left
// them: receive depth the iterations, at most 16000 (UC_MAX_RX), since
// a datagram that finds no receive is lost; inline 188 bytes in send_lat
// (DEF_INLINE_SEND_UD), and at most 1024 (MAX_INLINE_UD). UC takes the
// same receive depth, in iteration mode (perftest's force_dependecies),
// and RC's inline sizes.
func (c *config) udDefaults(set map[string]bool) {
	if c.uc() && !c.durationMode() && !set["r"] && !set["rx-depth"] {
		c.rx = min(c.iters, 16000)
	}
	if !c.ud() {
		return
	}
	if !set["r"] && !set["rx-depth"] {
		c.rx = min(c.iters, 16000)
	}
	if !set["I"] && !set["inline_size"] && !c.kind.bw {
		c.inline = 188
	}
	c.inline = min(c.inline, 1024)
}

func (c *config) check() error {
	if err := c.checkModes(); err != nil {
		return err
	}
	if _, err := c.bindMode(); err != nil {
		return err
	}
	if err := c.checkConn(); err != nil {
		return err
	}
	switch {
	case c.ibPort != 1:
		return &unsupportedError{fmt.Sprintf("-i %d (perftest's IB port) is not supported: a uroce device has one port, 1", c.ibPort)}
	case c.sl != 0:
		return &unsupportedError{fmt.Sprintf("-S %d (perftest's service level) is not supported: RoCEv2 carries none, 0 only", c.sl)}
	case c.qpTimeout < 1 || c.qpTimeout > 31:
		return fmt.Errorf("%w: -u %d: the QP timeout is 1 to 31 here (0, no timeout, is not supported)", ErrUsage, c.qpTimeout)
	case c.outs < 0:
		return fmt.Errorf("%w: -o %d: outstanding reads must be positive", ErrUsage, c.outs)
	case c.noPeak && !c.kind.bw:
		return fmt.Errorf("%w: -N: NoPeak only valid for BW tests", ErrUsage)
	case c.ud() && c.kind.verb != verbSend:
		return fmt.Errorf("%w: connection type UD: UD connection only possible in SEND tests (perftest's rule)", ErrUsage)
	case c.uc() && (c.kind.verb == verbRead || c.kind.verb == verbAtomic):
		return fmt.Errorf("%w: connection type UC: UC connection not possible in READ/ATOMIC verbs (perftest's rule)", ErrUsage)
	case c.uc() && c.rdmaCM:
		return fmt.Errorf("%w: connection type UC with -R: UC is not supported in librdmacm (perftest's rule)", ErrUsage)
	case c.selective && c.unreliable():
		return fmt.Errorf("%w: --selective_repeat: selective repeat is RC's, not %s's", ErrUsage, c.connName())
	case c.ud() && c.rdmaCM:
		return fmt.Errorf("%w: connection type UD with -R (rdma_cm) is not supported", ErrUsage)
	case c.ud() && c.bidir:
		return fmt.Errorf("%w: connection type UD with -b is not supported", ErrUsage)
	case c.ud() && c.durationMode():
		return fmt.Errorf("%w: connection type UD with -D or --run_infinitely is not supported", ErrUsage)
	case c.ud() && c.qps > 1:
		return fmt.Errorf("%w: connection type UD with -q %d is not supported: one QP", ErrUsage, c.qps)
	case c.size < 1 || c.size > 1<<23 && !c.all:
		return fmt.Errorf("%w: size %d out of 1..%d", ErrUsage, c.size, 1<<23)
	case c.atomic != atomicFetchAdd && c.kind.verb != verbAtomic:
		// perftest: "You are not running the atomic_lat/bw test!"
		return fmt.Errorf("%w: -A %s: the atomic operation applies to atomic_lat and atomic_bw only", ErrUsage, c.atomic)
	case c.atomic != atomicFetchAdd && c.atomic != atomicCmpSwap:
		return fmt.Errorf("%w: -A %s: invalid atomic type, choose from {%s,%s}", ErrUsage, c.atomic, atomicCmpSwap, atomicFetchAdd)
	case c.kind.verb == verbAtomic && c.size != 8:
		return fmt.Errorf("%w: atomic tests move 8 bytes", ErrUsage)
	case c.kind.verb == verbAtomic && c.all:
		return fmt.Errorf("%w: -a does not apply to atomic tests", ErrUsage)
	case c.iters < 5 && !c.kind.bw:
		return fmt.Errorf("%w: latency tests need at least 5 iterations", ErrUsage)
	case c.iters < 1:
		return fmt.Errorf("%w: iterations must be positive", ErrUsage)
	case c.mtu != 0 && perftest.MTUFromBytes(c.mtu) == 0:
		return fmt.Errorf("%w: MTU %d is not 256, 512, 1024, 2048 or 4096", ErrUsage, c.mtu)
	case c.tx < 1 || c.rx < 1 || c.qps < 1 || c.cqMod < 1:
		return fmt.Errorf("%w: depths, QPs and cq-mod must be positive", ErrUsage)
	case c.port < 1 || c.port > 65535:
		return fmt.Errorf("%w: port %d", ErrUsage, c.port)
	}
	if !slices.Contains(link.Backends(), c.link) {
		return fmt.Errorf("%w: link %q (%s)", ErrUsage, c.link, strings.Join(link.Backends(), ", "))
	}
	return nil
}

// connName is the connection type as perftest's banner names it.
func (c *config) connName() string {
	if c.ud() {
		return "UD"
	}
	if c.uc() {
		return "UC"
	}
	return "RC"
}
