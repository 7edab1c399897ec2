package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// cliCase is one command line run through mainCode: its exit status and
// what standard output and standard error must (and must not) hold.
type cliCase struct {
	name    string
	args    []string
	code    int
	stdout  []string // substrings
	stderr  []string // substrings
	once    string   // appears exactly once in stderr
	noOut   bool     // stdout empty
	noErr   bool     // stderr empty
	without []string // in neither
}

func runCLI(t *testing.T, tests []cliCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var so, se bytes.Buffer
			code := mainCode(tt.args, &so, &se)
			out, errOut := so.String(), se.String()
			if code != tt.code {
				t.Errorf("uroce-perf %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.code, out, errOut)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if tt.once != "" {
				if n := strings.Count(errOut, tt.once); n != 1 {
					t.Errorf("stderr holds %q %d times, want once:\n%s", tt.once, n, errOut)
				}
			}
			if tt.noOut && out != "" {
				t.Errorf("stdout not empty:\n%s", out)
			}
			if tt.noErr && errOut != "" {
				t.Errorf("stderr not empty:\n%s", errOut)
			}
			for _, s := range tt.without {
				if strings.Contains(out+errOut, s) {
					t.Errorf("output holds %q:\nstdout:\n%s\nstderr:\n%s", s, out, errOut)
				}
			}
		})
	}
}

// TestCLIParseErrors: a bad flag or value is said once, on stderr, with
// exit status 2 and a pointer to -h instead of the whole flag list.
func TestCLIParseErrors(t *testing.T) {
	runCLI(t, []cliCase{
		{name: "bad size", args: []string{"write_lat", "-s", "abc"}, code: 2,
			once: `invalid value "abc" for flag -s`, stderr: []string{"uroce-perf write_lat -h"}, noOut: true,
			without: []string{"Usage of"}},
		{name: "bad size long", args: []string{"send_bw", "--size=1x"}, code: 2,
			once: `invalid value "1x" for flag -size`, noOut: true},
		{name: "unknown flag", args: []string{"read_lat", "--zz"}, code: 2,
			once: "flag provided but not defined: -zz", stderr: []string{"uroce-perf read_lat -h"}, noOut: true},
		{name: "check", args: []string{"read_lat", "-c", "UC"}, code: 2,
			once: "connection type UC", noOut: true},
	})
}

// TestCLIHelp: -h and --help print the usage on standard output and exit
// 0, for the command and for each test.
func TestCLIHelp(t *testing.T) {
	var tests []cliCase
	for _, h := range []string{"-h", "--help", "-help"} {
		tests = append(tests, cliCase{name: "command" + h, args: []string{h}, code: 0,
			stdout: []string{"usage: uroce-perf TEST"}, noErr: true})
		for _, k := range kinds {
			tests = append(tests, cliCase{name: k.name + h, args: []string{k.name, h}, code: 0,
				stdout:  []string{"usage: uroce-perf " + k.name + " [flags] [peer]", "-s int", "-x int", "-R\t"},
				noErr:   true,
				without: []string{"help requested"}})
		}
	}
	tests = append(tests,
		cliCase{name: "bench-h", args: []string{"bench", "-h"}, code: 0,
			stdout: []string{"usage: uroce-perf bench [flags]", "-links string"}, noErr: true},
		cliCase{name: "bench bad value", args: []string{"bench", "-r", "x"}, code: 2,
			once: `invalid value "x" for flag -r`, stderr: []string{"uroce-perf bench -h"}, noOut: true})
	// -h after other flags, as perftest's getopt takes it anywhere.
	tests = append(tests, cliCase{name: "late", args: []string{"write_bw", "-s", "64", "10.0.0.1", "-h"}, code: 0,
		stdout: []string{"usage: uroce-perf write_bw"}, noErr: true})
	runCLI(t, tests)
}

// freePort returns a TCP port nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestCLIGIDIndex: with --ip, a -x the device's GID table does not hold
// fails at once with status 2, on either side and with or without -R,
// before the server waits or the client connects; -x 0 is the device's
// one GID. (With -d and no --ip, -x picks the address: TestGIDIndex.)
func TestCLIGIDIndex(t *testing.T) {
	srv, cli := loopbackPair(t)
	port := freePort(t)
	var tests []cliCase
	for _, cm := range [][]string{nil, {"-R"}} {
		for _, x := range []string{"99", "1", "-1"} {
			flags := append([]string{"-x", x, "-p", port}, cm...)
			tests = append(tests,
				cliCase{name: "server" + strings.Join(flags, "_"), args: append([]string{"write_lat", "--ip", srv.String()}, flags...), code: 2,
					once:    "-x " + x + ": GID index out of range: device udp:" + srv.String() + " has 1 GID(s), index 0 to 0",
					without: []string{"Waiting for client"}},
				cliCase{name: "client" + strings.Join(flags, "_"), args: append([]string{"read_bw", "--ip", cli.String(), srv.String()}, flags...), code: 2,
					once: "-x " + x + ": GID index out of range", without: []string{"connect"}})
		}
	}
	runCLI(t, tests)
}

// TestCLINoServer: a client whose server is not there fails at once, as
// perftest's "Couldn't connect to HOST:PORT", with the address, the port
// and the cause; --timeout (10 minutes here) is no wait for a server.
func TestCLINoServer(t *testing.T) {
	srv, cli := loopbackPair(t)
	port := freePort(t)
	runCLI(t, []cliCase{
		{name: "tcp", args: []string{"write_lat", "--timeout", "10m", "--ip", cli.String(), "-p", port, srv.String()}, code: 1,
			once: "couldn't connect to " + net.JoinHostPort(srv.String(), port) + ": connection refused (start the server first", noOut: true},
	})
	// The server's host is up, with a RoCE device and its CM, but the
	// test is not started there: the CM refuses the REQ.
	openCM(t, srv)
	runCLI(t, []cliCase{
		{name: "rdma_cm", args: []string{"send_bw", "-R", "--timeout", "10m", "--ip", cli.String(), "-p", port, srv.String()}, code: 1,
			once: "dial " + net.JoinHostPort(srv.String(), port) + ": connection rejected: invalid service ID (nobody listens on port " + port + " there: start the server first", noOut: true},
	})
}

// TestSayIfSlow: the client's waiting notice comes after slowAnswer, and
// not at all when the answer comes first.
func TestSayIfSlow(t *testing.T) {
	w := newBannerWriter("slow")
	sayIfSlow(w, "quick")()
	stop := sayIfSlow(w, "slow")
	select {
	case <-w.seen:
	case <-time.After(time.Minute):
	}
	stop()
	if got := w.String(); got != "uroce-perf: slow\n" {
		t.Errorf("notices %q, want only the slow one", got)
	}
	sayIfSlow(nil, "nowhere")()
}

// TestCLISameHost: a client given the address of the server's device, on
// this host, sits beside it instead of failing to bind the address the
// server holds (TestRDMACMSameHost for -R).
func TestCLISameHost(t *testing.T) {
	srv, _ := loopbackPair(t)
	port := freePort(t)
	so := newBannerWriter(waitingBanner)
	var se bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- mainCode([]string{"send_lat", "-n", "20", "-p", port, "--ip", srv.String()}, so, &se) }()
	select {
	case <-so.seen:
	case c := <-code:
		t.Fatalf("server: exit %d: %s", c, se.String())
	}
	runCLI(t, []cliCase{{name: "client", args: []string{"send_lat", "-n", "20", "-p", port, srv.String()}, code: 0,
		stdout: []string{" 2       20 "}, noErr: true}})
	if c := <-code; c != 0 {
		t.Errorf("server: exit %d\n%s\n%s", c, so.String(), se.String())
	}
}
