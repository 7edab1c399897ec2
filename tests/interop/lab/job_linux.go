package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Result is what a finished job left: its output and exit status.
type Result struct {
	Cmd      string
	Stdout   string
	Stderr   string
	ExitCode int
}

// Err returns nil for exit status 0, otherwise an error naming the
// command, its status and the tail of its output.
func (r Result) Err() error {
	if r.ExitCode == 0 {
		return nil
	}
	return fmt.Errorf("%q exited %d\nstdout:\n%s\nstderr:\n%s", r.Cmd, r.ExitCode, tail(r.Stdout, 15), tail(r.Stderr, 15))
}

// Job is a command running in a guest.
type Job struct {
	g   *Guest
	ID  string
	Cmd string
}

// pollInterval is how often the host looks for a job's exit status; the
// guest looks for new jobs every 100 ms.
const pollInterval = 50 * time.Millisecond

// Start hands cmd (a shell command line, run by the guest's busybox sh in
// /tmp) to the guest and returns without waiting for it.
func (g *Guest) Start(cmd string) (*Job, error) {
	select {
	case <-g.exited:
		return nil, fmt.Errorf("lab: %s: %w", g.Name, ErrGuestExited)
	default:
	}
	id := fmt.Sprintf("j%04d", g.jobs.Add(1))
	tmp := filepath.Join(g.share, "jobs", id+".tmp")
	// The guest only picks up *.sh, so the rename makes the job appear
	// whole.
	if err := os.WriteFile(tmp, []byte(cmd+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("lab: %s: job: %w", g.Name, err)
	}
	if err := os.Rename(tmp, filepath.Join(g.share, "jobs", id+".sh")); err != nil {
		return nil, fmt.Errorf("lab: %s: job: %w", g.Name, err)
	}
	return &Job{g: g, ID: id, Cmd: cmd}, nil
}

// Run runs cmd in the guest and waits for it. The error is for the lab
// (guest gone, ctx done); the command's own failure is in Result.ExitCode.
func (g *Guest) Run(ctx context.Context, cmd string) (Result, error) {
	j, err := g.Start(cmd)
	if err != nil {
		return Result{Cmd: cmd}, err
	}
	return j.Wait(ctx)
}

// Wait waits for the job to exit. When ctx ends first the job is killed
// and its output so far is returned with ctx's error.
func (j *Job) Wait(ctx context.Context) (Result, error) {
	g := j.g
	rcPath := filepath.Join(g.share, "out", j.ID+".rc")
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(rcPath); err == nil {
			r := j.output()
			r.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return r, fmt.Errorf("lab: %s: job %s: exit status %q: %w", g.Name, j.ID, b, err)
			}
			return r, nil
		}
		select {
		case <-tick.C:
		case <-g.exited:
			return j.output(), fmt.Errorf("lab: %s: job %s (%q): %w", g.Name, j.ID, j.Cmd, ErrGuestExited)
		case <-ctx.Done():
			j.Kill()
			return j.output(), fmt.Errorf("lab: %s: job %s (%q): %w", g.Name, j.ID, j.Cmd, ctx.Err())
		}
	}
}

// Done reports whether the job has exited.
func (j *Job) Done() bool {
	_, err := os.Stat(filepath.Join(j.g.share, "out", j.ID+".rc"))
	return err == nil
}

// Kill asks the guest to SIGKILL the job's process group, unless the job
// has exited already. It does not wait; Wait still returns the job's
// status once the guest has written it.
func (j *Job) Kill() error {
	err := os.WriteFile(filepath.Join(j.g.share, "kill", j.ID), nil, 0o644)
	if err != nil {
		return fmt.Errorf("lab: %s: kill job %s: %w", j.g.Name, j.ID, err)
	}
	return nil
}

func (j *Job) output() Result {
	r := Result{Cmd: j.Cmd, ExitCode: -1}
	out, _ := os.ReadFile(filepath.Join(j.g.share, "out", j.ID+".out"))
	errb, _ := os.ReadFile(filepath.Join(j.g.share, "out", j.ID+".err"))
	r.Stdout, r.Stderr = string(out), string(errb)
	return r
}

// WaitListen waits until something in the guest listens on TCP port
// (IPv4 or IPv6).
func (g *Guest) WaitListen(ctx context.Context, port int) error {
	return g.waitListen(ctx, port, "")
}

// WaitListen waits until something in the job's guest listens on TCP
// port, e.g. a perftest server before its client is started. If the job
// exits first, the error holds its output.
func (j *Job) WaitListen(ctx context.Context, port int) error {
	return j.g.waitListen(ctx, port, j.ID)
}

func (g *Guest) waitListen(ctx context.Context, port int, job string) error {
	// /proc/net/tcp*: local address "ADDR:PORT" in hex, state 0A = LISTEN.
	cmd := fmt.Sprintf(`while ! awk '$2 ~ /:%04X$/ && $4 == "0A" {f=1} END {exit !f}' /proc/net/tcp /proc/net/tcp6; do`, port)
	if job != "" {
		cmd += fmt.Sprintf(` [ -e /lab/out/%s.rc ] && exit 99;`, job)
	}
	cmd += ` sleep 0.1; done`
	r, err := g.Run(ctx, cmd)
	if err != nil {
		return fmt.Errorf("lab: %s: waiting for TCP port %d: %w", g.Name, port, err)
	}
	if r.ExitCode == 99 && job != "" {
		j := &Job{g: g, ID: job}
		out := j.output()
		return fmt.Errorf("lab: %s: job %s exited before listening on TCP port %d\nstdout:\n%s\nstderr:\n%s",
			g.Name, job, port, tail(out.Stdout, 15), tail(out.Stderr, 15))
	}
	return r.Err()
}

// Counters are rxe0's hw_counters (/sys/class/infiniband/rxe0/ports/1/hw_counters).
type Counters map[string]uint64

// Counters reads rxe0's hw_counters.
func (g *Guest) Counters(ctx context.Context) (Counters, error) {
	r, err := g.Run(ctx, `cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done`)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("lab: %s: hw_counters: %w", g.Name, err)
	}
	c := Counters{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("lab: %s: hw_counters: %q: %w", g.Name, line, err)
		}
		c[name] = n
	}
	if len(c) == 0 {
		return nil, errors.New("lab: " + g.Name + ": no hw_counters")
	}
	return c, nil
}

// Sub returns c - before, counter by counter.
func (c Counters) Sub(before Counters) Counters {
	d := Counters{}
	for k, v := range c {
		d[k] = v - before[k]
	}
	return d
}
