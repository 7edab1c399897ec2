package lab_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/tests/interop/lab"
)

// TestGuestJobs boots one guest and checks the job protocol: output,
// exit status, concurrency, kill, and that rxe0 is what the tests expect.
func TestGuestJobs(t *testing.T) {
	l := lab.New(t, lab.Config{})
	g := l.Boot(lab.GuestConfig{})[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	r, err := g.Run(ctx, `echo out; echo err >&2; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "out\n" || r.Stderr != "err\n" || r.ExitCode != 3 {
		t.Errorf("got stdout %q stderr %q exit %d, want \"out\\n\" \"err\\n\" 3", r.Stdout, r.Stderr, r.ExitCode)
	}

	// A job left running does not hold up others, and can be killed.
	long, err := g.Start(`echo started; sleep 600`)
	if err != nil {
		t.Fatal(err)
	}
	r, err = g.Run(ctx, `ibv_devinfo -d rxe0 -v; cat /sys/class/infiniband/rxe0/ports/1/gids/1`)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hca_id:\trxe0", "PORT_ACTIVE", "active_mtu:\t\t1024", "0000:0000:0000:0000:0000:ffff:0a4d:000b"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("ibv_devinfo/gids output lacks %q:\n%s", want, r.Stdout)
		}
	}
	if long.Done() {
		t.Fatalf("sleep 600 finished already")
	}
	kctx, kcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	r, err = long.Wait(kctx)
	kcancel()
	if !errors.Is(err, context.DeadlineExceeded) || r.Stdout != "started\n" {
		t.Fatalf("Wait on a running job: %q, %v; want its output so far and a deadline error", r.Stdout, err)
	}
	r, err = long.Wait(ctx) // the kill Wait sent on its deadline
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 128+9 {
		t.Errorf("killed job exited %d, want %d (SIGKILL)", r.ExitCode, 128+9)
	}

	// A server that fails before it listens is reported, not waited for.
	bad, err := g.Start(`echo no such device >&2; exit 1`)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.WaitListen(ctx, 7001); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Errorf("WaitListen on a job that exited: %v, want an error with its stderr", err)
	}

	// The Peer namespace, where uroce runs, reaches the guest through
	// the veth and the bridge.
	srv, err := g.Start(`echo hello from the guest | nc -l -p 7000`)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WaitListen(ctx, 7000); err != nil {
		t.Fatal(err)
	}
	var got []byte
	err = l.Peer.Do(func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(g.Addr.String(), "7000"))
		if err != nil {
			return err
		}
		defer c.Close()
		got, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("from the peer namespace to %s: %v", g.Addr, err)
	}
	if string(got) != "hello from the guest\n" {
		t.Errorf("read %q from the guest", got)
	}
	if r, err := srv.Wait(ctx); err != nil || r.ExitCode != 0 {
		t.Errorf("nc in the guest: %v, %v", err, r.Err())
	}

	c, err := g.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sent_pkts", "rcvd_pkts", "rcvd_seq_err", "out_of_seq_request", "duplicate_request", "completer_retry_err"} {
		if _, ok := c[name]; !ok {
			t.Errorf("hw_counters lack %s: %v", name, c)
		}
	}
}
