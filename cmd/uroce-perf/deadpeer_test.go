package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// TestDeadPeer: a server that vanishes in the middle of write_bw leaves
// the client's QP with seven retries (retry count 7, as IBA and ConnectX
// count it); the client ends with IBV_WC_RETRY_EXC_ERR in perftest's
// words and exit status 1, well before its --timeout stall detector.
func TestDeadPeer(t *testing.T) {
	srvCfg, cliCfg, srvAddr, cliAddr := pairConfigs(t, "write_bw", "-s", "4096", "-n", "100000000")
	ln, err := net.Listen("tcp", net.JoinHostPort(srvAddr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sdev, err := verbs.OpenAddr(srvAddr, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	defer sdev.Close()
	cdev, err := verbs.OpenAddr(cliAddr, verbs.Inline())
	if err != nil {
		t.Fatal(err)
	}
	defer cdev.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The server's device closes once the client's WRITEs flow: its
	// port stops answering, as a peer that died would.
	go func() {
		for cdev.Counters().CompletedSends < 100 {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		sdev.Close()
	}()
	e := pairEnds{srvDev: sdev, cliDev: cdev, srvName: "udp:" + srvAddr.String(), cliName: "udp:" + cliAddr.String(), ln: ln,
		dial: func() (net.Conn, error) { return dial(ctx, ln.Addr().String(), cliCfg.timeout) }}
	start := time.Now()
	_, err = e.run(ctx, srvCfg, cliCfg, io.Discard, io.Discard)
	took := time.Since(start)
	var we *wcError
	if !errors.As(err, &we) || we.wc.Status != verbs.WCRetryExcErr || we.recv {
		t.Fatalf("after %v: %v; want a send completion with RETRY_EXC_ERR", took, err)
	}
	if errors.Is(err, ErrStalled) || took > cliCfg.timeout/2 {
		t.Errorf("took %v: the stall detector, not the transport, ended the run", took)
	}
	var stderr bytes.Buffer
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	out := stderr.String()
	if !strings.HasPrefix(out, " Completion with error at client\n Failed status 12: wr_id ") || !strings.Contains(out, " syndrom 0x0\nscnt=") {
		t.Errorf("stderr does not start with perftest's report of the failed completion:\n%s", out)
	}
	t.Logf("after %v:\n%s", took, out)
}
