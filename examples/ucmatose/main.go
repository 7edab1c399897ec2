package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

type options struct {
	server      string // -s: the server's address; empty on the server
	bind        string // -b
	port        int
	connections int
	count       int
	size        int
	timeout     time.Duration

	// For tests: called once the server listens.
	listening func()
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ucmatose", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.server, "s", "", "server `address` (client mode)")
	fs.StringVar(&o.bind, "b", "", "bind `address`")
	fs.IntVar(&o.port, "p", 7471, "`port`")
	fs.IntVar(&o.connections, "c", 1, "`connections`")
	fs.IntVar(&o.count, "C", 10, "message `count` per connection")
	fs.IntVar(&o.size, "S", 100, "message `size`")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (uroce only; 0: never)")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.connections < 1:
		return o, fmt.Errorf("bad connections %d", o.connections)
	case o.count < 0 || o.size < 0:
		return o, fmt.Errorf("bad count %d or size %d", o.count, o.size)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	}
	if o.size == 0 {
		o.count = 0 // cmatose's create_message
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("ucmatose", err)
	}
	ctx, cancel := cli.Context(o.timeout)
	d, err := netdev.OpenCM(o.bind, o.server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	// cmatose's last lines, on standard output, failed or not.
	fmt.Println("test complete")
	if err != nil {
		fmt.Println("ucmatose:", err)
		fmt.Println("return status 1")
		os.Exit(1)
	}
	fmt.Println("return status 0")
}

// node is one connection's objects (cmatose's struct cmatest_node).
type node struct {
	pd     *verbs.PD
	sendCQ *verbs.CQ
	recvCQ *verbs.CQ
	qp     *verbs.QueuePair
	mr     *verbs.MR
	conn   *rdmacm.Conn
}

// newNode is cmatose's init_node and post_recvs: the QP in INIT with every
// receive posted before the connection exists.
func newNode(d *verbs.Device, o options) (n *node, err error) {
	cqe := max(o.count, 1)
	n = &node{pd: d.AllocPD(), sendCQ: d.CreateCQ(cqe), recvCQ: d.CreateCQ(cqe)}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if n.qp, err = n.pd.CreateQP(&verbs.QPInit{SendCQ: n.sendCQ, RecvCQ: n.recvCQ, SignalAll: true,
		Cap: verbs.QPCap{MaxSendWR: cqe, MaxRecvWR: cqe, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	if n.mr, err = n.pd.AllocMR(max(o.size, 1), verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if err = rdmacm.InitQP(n.qp, 0); err != nil {
		return nil, err
	}
	for range o.count {
		if err = n.qp.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{n.mr.SGE(0, o.size)}}); err != nil {
			return nil, fmt.Errorf("failed to post receives: %w", err)
		}
	}
	return n, nil
}

func (n *node) close() {
	if n.qp != nil {
		n.qp.Destroy()
	}
	if n.mr != nil {
		n.mr.Dereg()
	}
	n.sendCQ.Destroy()
	n.recvCQ.Destroy()
}

func (n *node) postSends(o options) error {
	for range o.count {
		if err := n.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{n.mr.SGE(0, o.size)}}); err != nil {
			return fmt.Errorf("failed to post sends: %w", err)
		}
	}
	return nil
}

// poll waits for count successful completions on cq.
func poll(ctx context.Context, cq *verbs.CQ, count int) error {
	var wc [8]verbs.WC
	for done := 0; done < count; {
		k, err := cq.Wait(ctx, wc[:min(8, count-done)])
		if err != nil {
			return fmt.Errorf("failed polling CQ: %w", err)
		}
		for _, w := range wc[:k] {
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("completion status %v", w.Status)
			}
		}
		done += k
	}
	return nil
}

// run is the whole program once the device is open: CM, connections,
// messages, disconnects. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	m, err := rdmacm.Open(d, rdmacm.Config{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()

	nodes := make([]*node, 0, o.connections)
	defer func() {
		for _, n := range nodes {
			n.close()
		}
	}()
	if o.server == "" {
		return server(ctx, o, d, m, &nodes, out)
	}
	return client(ctx, o, d, m, &nodes, out)
}

func server(ctx context.Context, o options, d *verbs.Device, m *rdmacm.CM, nodes *[]*node, out io.Writer) error {
	l, err := m.Listen(uint16(o.port))
	if err != nil {
		return fmt.Errorf("failure trying to listen: %w", err)
	}
	defer l.Close()
	// Printed once listening, so a script may start the client on it.
	fmt.Fprintln(out, "cmatose: starting server")
	if o.listening != nil {
		o.listening()
	}
	for range o.connections {
		req, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		n, err := newNode(d, o)
		if err != nil {
			req.Reject(nil)
			return err
		}
		*nodes = append(*nodes, n)
		// rdma_accept(id, NULL): the request's own offer.
		if n.conn, err = req.Accept(ctx, n.qp, &rdmacm.Params{ResponderResources: req.InitiatorDepth, InitiatorDepth: req.ResponderResources}); err != nil {
			return fmt.Errorf("failure accepting: %w", err)
		}
	}
	if o.count > 0 {
		fmt.Fprintln(out, "initiating data transfers")
		for _, n := range *nodes {
			if err := n.postSends(o); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "completing sends")
		for _, n := range *nodes {
			if err := poll(ctx, n.sendCQ, o.count); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "receiving data transfers")
		for _, n := range *nodes {
			if err := poll(ctx, n.recvCQ, o.count); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "data transfers complete")
	}
	fmt.Fprintln(out, "cmatose: disconnecting")
	for _, n := range *nodes {
		if err := n.conn.Disconnect(); err != nil {
			return err
		}
	}
	for _, n := range *nodes {
		select {
		case <-n.conn.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fmt.Fprintln(out, "disconnected")
	return nil
}

func client(ctx context.Context, o options, d *verbs.Device, m *rdmacm.CM, nodes *[]*node, out io.Writer) error {
	fmt.Fprintln(out, "cmatose: starting client")
	dst, err := netdev.Resolve(o.server, o.port)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "cmatose: connecting")
	for range o.connections {
		n, err := newNode(d, o)
		if err != nil {
			return err
		}
		*nodes = append(*nodes, n)
		// cmatose's conn_param: one READ each way, retry count 5.
		if n.conn, err = m.Dial(ctx, dst, n.qp, &rdmacm.Params{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}); err != nil {
			return fmt.Errorf("event: %w", err)
		}
	}
	if o.count > 0 {
		fmt.Fprintln(out, "receiving data transfers")
		for _, n := range *nodes {
			if err := poll(ctx, n.recvCQ, o.count); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "sending replies")
		for _, n := range *nodes {
			if err := n.postSends(o); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "data transfers complete")
	}
	// The server disconnects once it has every reply; answer each
	// (cmatose's disconnect_events: DISCONNECTED → rdma_disconnect).
	for _, n := range *nodes {
		select {
		case <-n.conn.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
