package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// buildExample builds one of examples/ (once per test binary) for the
// Peer namespace to run.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	return buildOnce(t, "github.com/uroce/uroce/examples/"+name)
}

// facing is one run of a uroce example in the Peer namespace against its
// rdma-core counterpart on a guest, one as the server and the other as
// the client.
type facing struct {
	prog        string // the guest's program, for logs and errors
	bin         string // the example, from buildExample
	uroceClient bool   // uroce is the client, the guest the server
	guestCmd    string // the guest's command line, complete
	uroceArgs   []string
	// cmPort is the rdma_cm port the servers listen on; 0 for programs
	// that swap addresses over TCP on perftestPort (the pingpongs).
	cmPort int
	// uroceReady is the line a uroce rdma_cm server prints once it
	// listens (it opens no socket to wait for).
	uroceReady string
}

// facingResult is what both sides printed, how they ended, and the
// capture of the bridge.
type facingResult struct {
	guest        lab.Result
	uroce        string // stdout and stderr
	uroceErr     error
	frames       []pcapfile.Record
	captureError error
	stats        lab.RoCEStats
}

// run runs f on g, capturing the bridge: the server first, the client
// once the server listens, and the server has a minute to end once the
// client did. It fails the test only for the lab's own failures and a
// server that does not end; checkEnds and the callers judge the programs.
func (f facing) run(t *testing.T, l *lab.Lab, g *lab.Guest) facingResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	example := "uroce " + filepath.Base(f.bin)
	var res facingResult
	capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))
	if f.uroceClient {
		job, err := g.Start(f.guestCmd)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Kill()
		if f.cmPort != 0 {
			err = waitCMListen(ctx, g, f.cmPort)
		} else {
			err = g.WaitListen(ctx, perftestPort)
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.PeerCommand(ctx, f.bin, f.uroceArgs...).CombinedOutput()
		res.uroce, res.uroceErr = string(out), err
		// An rdma_cm server ends when the client disconnects.
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if res.guest, err = job.Wait(wctx); err != nil {
			job.Kill()
			// The capture's end shows which side stopped answering.
			frames, _ := capture.Stop()
			t.Fatalf("%v\n%s (%v):\n%s\nconsole:\n%s\nlast packets on the bridge:\n%s", err, example, res.uroceErr, res.uroce, g.ConsoleTail(30), lab.Tail(frames, 40))
		}
	} else {
		var out syncBuilder
		cmd, done := startPeer(ctx, t, l, f.uroceReady, &out, f.bin, f.uroceArgs...)
		if f.uroceReady == "" {
			if err := waitPeerListen(ctx, l, perftestPort); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if res.guest, err = g.Run(ctx, f.guestCmd); err != nil {
			t.Fatal(err)
		}
		select {
		case res.uroceErr = <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("%s server still running a minute after the guest's client ended\nguest:\n%s%s\nuroce:\n%s", example, res.guest.Stdout, res.guest.Stderr, out.String())
		}
		res.uroce = out.String()
	}
	res.frames, res.captureError = capture.Stop()
	res.stats = lab.VerifyRoCE(res.frames)
	t.Logf("%s (%s):\n%s%s", f.prog, g.Name, res.guest.Stdout, res.guest.Stderr)
	t.Logf("%s:\n%s", example, res.uroce)
	t.Logf("capture: %v", res.stats)
	return res
}

// checkEnds checks that the capture was taken and both programs exited
// successfully.
func (res *facingResult) checkEnds(t *testing.T, f facing) {
	t.Helper()
	if res.captureError != nil {
		t.Error(res.captureError)
	}
	if err := res.guest.Err(); err != nil {
		t.Errorf("%s: %v", f.prog, err)
	}
	if res.uroceErr != nil {
		t.Errorf("uroce %s: %v", filepath.Base(f.bin), res.uroceErr)
	}
}

// waitCMListen waits until an rdma_cm ID in the guest listens on port
// (rdma_cm servers open no socket, so WaitListen cannot see them).
func waitCMListen(ctx context.Context, g *lab.Guest, port int) error {
	r, err := g.Run(ctx, fmt.Sprintf(`while ! rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ':%d '; do sleep 0.1; done`, port))
	if err != nil {
		return fmt.Errorf("%s: waiting for an rdma_cm listener on port %d: %w", g.Name, port, err)
	}
	return r.Err()
}

// waitPeerListen waits until something in the Peer namespace listens on
// TCP port (probing with a connection would take the server's one accept).
func waitPeerListen(ctx context.Context, l *lab.Lab, port int) error {
	for {
		out, err := l.PeerCommand(ctx, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if err == nil && len(strings.TrimSpace(string(out))) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on port %d in the peer namespace: %w", port, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startPeer starts a uroce program in the Peer namespace and returns when
// it printed a line containing ready (at once if ready is empty); out
// collects everything it prints, and done gets its exit (cmd.Wait's
// error) once out is complete.
func startPeer(ctx context.Context, t *testing.T, l *lab.Lab, ready string, out *syncBuilder, bin string, args ...string) (cmd *exec.Cmd, done <-chan error) {
	t.Helper()
	cmd = l.PeerCommand(ctx, bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	readAll := make(chan struct{})
	isReady := make(chan struct{})
	go func() {
		defer close(readAll)
		seen := ready == ""
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !seen && strings.Contains(sc.Text(), ready) {
				close(isReady)
				seen = true
			}
		}
	}()
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-readAll
		exited <- err
		waited <- err
	}()
	if ready == "" {
		return cmd, waited
	}
	select {
	case <-isReady:
	case err := <-waited:
		t.Fatalf("%s exited (%v) before printing %q:\n%s", bin, err, ready, out.String())
	case <-ctx.Done():
		t.Fatalf("%s never printed %q: %v\n%s", bin, ready, ctx.Err(), out.String())
	}
	return cmd, waited
}

// syncBuilder is a strings.Builder for one writer and other readers.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteString(x string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(x)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lateRetransmits counts the requests from one side (from tells its
// source addresses) in frames that repeat a PSN that side had already
// sent to the same QP and that came after the other side's last packet.
// uroce's adaptive timer may fire while a TCG guest is descheduled (a
// spurious retransmission, as in TCP); when that resends the last message
// after the guest's program got its last completion and destroyed its QP,
// rxe drops the copy before counting it (hdr_check finds no QP), so
// rcvd_pkts falls short of uroce's TxPackets by that many. The other way
// round, rxe's fixed timer may resend its last message after uroce's
// program has read its last packet and left, and uroce's RxPackets falls
// short of the guest's sent_pkts by that many.
func lateRetransmits(frames []pcapfile.Record, from func(netip.Addr) bool) int {
	type key struct {
		qpn uint32
		psn bth.PSN
	}
	var (
		f    bth.Frame
		seen = map[key]bool{}
		dups []time.Time // send times of addr's repeated requests
		last time.Time   // the other side's last packet
	)
	for _, r := range frames {
		if f.Decode(r.Data) != nil {
			continue
		}
		var src netip.Addr
		switch f.IPVersion() {
		case 4:
			src = f.IPv4().Src()
		case 6:
			src = f.IPv6().Src()
		}
		if !from(src.Unmap()) {
			last = r.Time
			continue
		}
		b := f.BTH()
		if !b.Opcode().Has(bth.Request) {
			continue
		}
		k := key{b.DestQP(), b.PSN()}
		if seen[k] {
			dups = append(dups, r.Time)
		}
		seen[k] = true
	}
	n := 0
	for _, at := range dups {
		if at.After(last) {
			n++
		}
	}
	return n
}

// fromUroce and fromGuest tell the lab's two sides apart by source
// address.
func fromUroce(a netip.Addr) bool { return a.Unmap() == lab.PeerAddr.Addr() }
func fromGuest(a netip.Addr) bool { return !fromUroce(a) }
