package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

type options struct {
	cli.CMTest
	port int
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ucmatose", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.CMTest.Flags(fs)
	fs.IntVar(&o.port, "p", 7471, "`port`")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.port < 1 || o.port > 65535 {
		return o, fmt.Errorf("bad port %d", o.port)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("ucmatose", err)
	}
	ctx, cancel := cli.Context(o.Timeout)
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	cli.CMTestExit("ucmatose", err)
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
	cqe := max(o.Count, 1)
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
	if n.mr, err = n.pd.AllocMR(max(o.Size, 1), verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if err = rdmacm.InitQP(n.qp, 0); err != nil {
		return nil, err
	}
	for range o.Count {
		if err = n.qp.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{n.mr.SGE(0, o.Size)}}); err != nil {
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
	for range o.Count {
		if err := n.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{n.mr.SGE(0, o.Size)}}); err != nil {
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

	nodes := make([]*node, 0, o.Connections)
	defer func() {
		for _, n := range nodes {
			n.close()
		}
	}()
	if o.Server == "" {
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
	o.Listen()
	for range o.Connections {
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
	if o.Count > 0 {
		fmt.Fprintln(out, "initiating data transfers")
		for _, n := range *nodes {
			if err := n.postSends(o); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "completing sends")
		for _, n := range *nodes {
			if err := poll(ctx, n.sendCQ, o.Count); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "receiving data transfers")
		for _, n := range *nodes {
			if err := poll(ctx, n.recvCQ, o.Count); err != nil {
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
	dst, err := netdev.Resolve(o.Server, o.port)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "cmatose: connecting")
	for range o.Connections {
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
	if o.Count > 0 {
		fmt.Fprintln(out, "receiving data transfers")
		for _, n := range *nodes {
			if err := poll(ctx, n.recvCQ, o.Count); err != nil {
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
