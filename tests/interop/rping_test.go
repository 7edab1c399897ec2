package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// rpingPort is rping's default rdma_cm port.
const rpingPort = 7174

// buildExample builds one of examples/ for the Peer namespace to run.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/uroce/uroce/examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build examples/%s: %v\n%s", name, err, out)
	}
	return bin
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

// startPeer starts a uroce program in the Peer namespace and returns when
// it printed a line containing ready; out collects everything it prints,
// and done gets its exit (cmd.Wait's error) once out is complete.
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
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if isReady != nil && strings.Contains(sc.Text(), ready) {
				close(isReady)
				isReady = nil
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

// rpingLines counts the lines of an rping's output that start with
// prefix, and checks they are the pings rping sends: "rdma-ping-N: "
// then letters, in order.
func rpingLines(t *testing.T, who, out, prefix string, count int) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		want := fmt.Sprintf("%srdma-ping-%d: %c", prefix, n, 'A'+n)
		if !strings.HasPrefix(line, want) {
			t.Errorf("%s: line %q, want it to start %q", who, line, want)
		}
		n++
	}
	if n != count {
		t.Errorf("%s printed %d %q lines, want %d:\n%s", who, n, prefix, count, out)
	}
}

// TestRpingRxe runs uroce's examples/rping against rping from rdmacm-utils
// on an rxe guest, each side as client and as server: the connection is
// made by the CM over QP1 (no TCP), then 10 pings of SEND, RDMA READ and
// RDMA WRITE with the client validating every one (-V). Both exit
// statuses, both sides' ping lines and a capture of the bridge (every
// RoCE packet verifies; CM MADs as UD SENDs, and the RC opcodes rping
// uses) are checked.
func TestRpingRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "rping")
	g := l.Boot(lab.GuestConfig{})[0]
	const count = 10
	peer := lab.PeerAddr.Addr().String()
	for _, uroceClient := range []bool{true, false} {
		name := "uroce-server"
		if uroceClient {
			name = "uroce-client"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
			defer cancel()
			capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))
			var guest lab.Result
			var uroce string
			var uroceErr error
			if uroceClient {
				job, err := g.Start(fmt.Sprintf("rping -s -a %v -v -V -C %d", g.Addr, count))
				if err != nil {
					t.Fatal(err)
				}
				defer job.Kill()
				if err := waitCMListen(ctx, g, rpingPort); err != nil {
					t.Fatal(err)
				}
				out, err := l.PeerCommand(ctx, bin, "-c", "-d", "-timeout", "2m", "-I", peer, "-a", g.Addr.String(), "-v", "-V", "-C", fmt.Sprint(count)).CombinedOutput()
				uroce, uroceErr = string(out), err
				// The server ends when the client disconnects; give
				// it a minute once uroce is done.
				wctx, wcancel := context.WithTimeout(ctx, time.Minute)
				defer wcancel()
				if guest, err = job.Wait(wctx); err != nil {
					job.Kill()
					t.Fatalf("%v\nuroce rping (%v):\n%s\nconsole:\n%s", err, uroceErr, uroce, g.ConsoleTail(30))
				}
			} else {
				var out syncBuilder
				cmd, done := startPeer(ctx, t, l, "listening on port", &out, bin, "-s", "-d", "-timeout", "3m", "-a", peer, "-v")
				var err error
				if guest, err = g.Run(ctx, fmt.Sprintf("rping -c -a %s -v -V -C %d", peer, count)); err != nil {
					t.Fatal(err)
				}
				select {
				case uroceErr = <-done:
				case <-time.After(time.Minute):
					cmd.Process.Kill()
					t.Fatalf("uroce rping server still running a minute after the guest's client ended\nguest:\n%s%s\nuroce:\n%s", guest.Stdout, guest.Stderr, out.String())
				}
				uroce = out.String()
			}
			frames, err := capture.Stop()
			if err != nil {
				t.Error(err)
			}
			stats := lab.VerifyRoCE(frames)
			t.Logf("rping (%s):\n%s%s", g.Name, guest.Stdout, guest.Stderr)
			t.Logf("uroce rping:\n%s", uroce)
			t.Logf("capture: %v", stats)

			if err := guest.Err(); err != nil {
				t.Errorf("rping: %v", err)
			}
			if uroceErr != nil {
				t.Errorf("uroce rping: %v", uroceErr)
			}
			// rping reports a failed -V check on stderr and stops
			// pinging, so the uroce side would also see fewer pings.
			if strings.Contains(guest.Stderr+uroce, "data mismatch") {
				t.Error("validation failed")
			}
			// A server rping ends at the client's disconnect. (A
			// client rping's own report of it races with its exit.)
			if uroceClient && !strings.Contains(guest.Stderr, "server DISCONNECT EVENT") {
				t.Error("rping's server never saw the disconnect")
			}
			if uroceClient {
				rpingLines(t, "uroce client", uroce, "ping data: ", count)
			} else {
				rpingLines(t, "uroce server", uroce, "server ping data: ", count)
			}
			if uroceClient {
				rpingLines(t, "rping server", guest.Stdout, "server ping data: ", count)
			} else {
				rpingLines(t, "rping client", guest.Stdout, "ping data: ", count)
			}
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			// REQ, REP, RTU, DREQ, DREP (more only if one was
			// lost); each ping is two advertisements and two go
			// aheads, one READ and one WRITE, each acknowledged.
			for op, want := range map[bth.Opcode]int{bth.RCSendOnly: 4 * count, bth.RCReadRequest: count,
				bth.RCReadResponseOnly: count, bth.RCWriteOnly: count, bth.RCAcknowledge: 5 * count} {
				// More only if a slow guest made a side retransmit.
				if stats.Opcodes[op] < want {
					t.Errorf("%d %v packets in the capture, want %d", stats.Opcodes[op], op, want)
				}
			}
			if n := stats.Opcodes[bth.UDSendOnly]; n < 5 {
				t.Errorf("%d CM MADs in the capture, want at least 5", n)
			}
		})
	}
}
