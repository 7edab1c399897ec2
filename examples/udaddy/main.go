package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// port is udaddy's rdma_cm port: fixed, it has no flag for it.
const port = 7174

type options struct {
	cli.CMTest
	tos int // -t; -1 unset
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	o := options{tos: -1}
	var ps, psName, format, tos string
	fs := flag.NewFlagSet("udaddy", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.CMTest.Flags(fs)
	fs.StringVar(&tos, "t", "", "type of `service` (the IP TOS byte of the datagrams)")
	fs.StringVar(&ps, "p", "", "port `space`: 0x111 for UDP (the only one uroce has)")
	fs.StringVar(&psName, "P", "", "port `space`: udp (ipoib is refused)")
	fs.StringVar(&format, "f", "", "address `format`: name or ip (gid is refused)")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if ps != "" {
		if v, err := strconv.ParseUint(ps, 0, 16); err != nil || mad.PortSpace(v) != mad.PortSpaceUDP {
			return o, fmt.Errorf("port space %s: uroce has the UDP port space (%#x) only", ps, uint16(mad.PortSpaceUDP))
		}
	}
	if psName != "" && !strings.HasPrefix(strings.ToLower(psName), "udp") {
		return o, fmt.Errorf("port space %s: uroce has the UDP port space only", psName)
	}
	if f := strings.ToLower(format); f != "" && !strings.HasPrefix(f, "ip") && !strings.HasPrefix(f, "name") {
		return o, fmt.Errorf("address format %s: uroce takes names and IP addresses only", format)
	}
	if tos != "" {
		v, err := strconv.ParseUint(tos, 0, 8)
		if err != nil {
			return o, fmt.Errorf("bad type of service %s", tos)
		}
		o.tos = int(v)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("udaddy", err)
	}
	ctx, cancel := cli.Context(o.Timeout)
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	cancel()
	cli.CMTestExit("udaddy", err)
}

// node is one UD service's objects (udaddy's struct cmatest_node).
type node struct {
	pd        *verbs.PD
	cq        *verbs.CQ
	qp        *verbs.QueuePair
	mr        *verbs.MR
	ah        *verbs.AH
	remoteQPN uint32
	qkey      uint32
}

// newNode is udaddy's verify_test_params, init_node and post_recvs: the
// QP in RTS with rdma_cm's Q_Key and every receive posted (room for the
// GRH and a message) before the resolution.
func newNode(d *verbs.Device, o options) (n *node, err error) {
	if mtu := d.MaxPathMTU(); o.Count > 0 && o.Size > mtu {
		return nil, fmt.Errorf("message_size %d is larger than active mtu %d", o.Size, mtu)
	}
	cqe := 2
	if o.Count > 0 {
		cqe = 2 * o.Count
	}
	wrs := max(o.Count, 1)
	n = &node{pd: d.AllocPD(), cq: d.CreateCQ(cqe)}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if n.qp, err = n.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: verbs.QPCap{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, fmt.Errorf("unable to create QP: %w", err)
	}
	if n.mr, err = n.pd.AllocMR(o.Size+verbs.GRHLen, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if err = rdmacm.InitUDQP(n.qp, 0); err != nil {
		return nil, err
	}
	for range o.Count {
		if err = n.qp.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{n.mr.SGE(0, o.Size+verbs.GRHLen)}}); err != nil {
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
	n.cq.Destroy()
}

// postSends is udaddy's post_sends: SENDs with immediate data, the
// sender's QPN, which is how the server learns where to answer.
func (n *node) postSends(o options, signaled bool) error {
	var flags verbs.SendFlags
	if signaled {
		flags = verbs.SendSignaled
	}
	for range o.Count {
		if err := n.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSendWithImm, Flags: flags, Imm: n.qp.QPN(),
			SGL: []verbs.SGE{n.mr.SGE(0, o.Size)}, AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.qkey}); err != nil {
			return fmt.Errorf("failed to post sends: %w", err)
		}
	}
	return nil
}

// poll is udaddy's poll_cqs for one node: count successful completions;
// with no address yet, the first completion gives it (create_reply_ah:
// the source GID, the immediate data as the QPN, the QP's own Q_Key).
func (n *node) poll(ctx context.Context, count int, tos int) error {
	var wc [8]verbs.WC
	for done := 0; done < count; {
		k, err := n.cq.Wait(ctx, wc[:min(8, count-done)])
		if err != nil {
			return fmt.Errorf("failed polling CQ: %w", err)
		}
		for _, w := range wc[:k] {
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("completion status %v", w.Status)
			}
		}
		if n.ah == nil {
			if n.ah, err = n.pd.CreateAH(verbs.AHAttr{DGID: wc[0].SrcGID, HopLimit: 64, TrafficClass: uint8(max(tos, 0))}); err != nil {
				return fmt.Errorf("failure creating address handle: %w", err)
			}
			n.remoteQPN, n.qkey = wc[0].Imm, rdmacm.UDPQKey
		}
		done += k
	}
	return nil
}

// run is the whole program once the device is open. It closes d.
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
	l, err := m.ListenUD(port)
	if err != nil {
		return fmt.Errorf("failure trying to listen: %w", err)
	}
	defer l.Close()
	// Printed once listening (udaddy prints it just before), so a script
	// may start the client on it.
	fmt.Fprintln(out, "udaddy: starting server")
	o.Listen()
	for range o.Connections {
		req, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		n, err := newNode(d, o)
		if err != nil {
			fmt.Fprintln(out, "udaddy: failing connection request")
			req.Reject(nil)
			return err
		}
		*nodes = append(*nodes, n)
		if err := req.Accept(n.qp, nil); err != nil {
			return fmt.Errorf("failure accepting: %w", err)
		}
	}
	if o.Count == 0 {
		return nil
	}
	fmt.Fprintln(out, "receiving data transfers")
	for _, n := range *nodes {
		if err := n.poll(ctx, o.Count, o.tos); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "sending replies")
	for _, n := range *nodes {
		if err := n.postSends(o, true); err != nil {
			return err
		}
	}
	for _, n := range *nodes {
		if err := n.poll(ctx, o.Count, o.tos); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "data transfers complete")
	return nil
}

func client(ctx context.Context, o options, d *verbs.Device, m *rdmacm.CM, nodes *[]*node, out io.Writer) error {
	fmt.Fprintln(out, "udaddy: starting client")
	dst, err := netdev.Resolve(o.Server, port)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "udaddy: connecting")
	for range o.Connections {
		n, err := newNode(d, o)
		if err != nil {
			return err
		}
		*nodes = append(*nodes, n)
		peer, err := m.DialUD(ctx, dst, n.qp, nil)
		if err != nil {
			return fmt.Errorf("event: %w", err)
		}
		attr := peer.AHAttr()
		if o.tos >= 0 {
			attr.TrafficClass = uint8(o.tos)
		}
		if n.ah, err = n.pd.CreateAH(attr); err != nil {
			return fmt.Errorf("failure creating address handle: %w", err)
		}
		n.remoteQPN, n.qkey = peer.QPN, peer.QKey
	}
	if o.Count == 0 {
		return nil
	}
	fmt.Fprintln(out, "initiating data transfers")
	for _, n := range *nodes {
		if err := n.postSends(o, false); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "receiving data transfers")
	for _, n := range *nodes {
		if err := n.poll(ctx, o.Count, o.tos); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "data transfers complete")
	return nil
}
