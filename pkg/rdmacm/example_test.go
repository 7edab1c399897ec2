package rdmacm_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// openLoopback opens a device on addr with the kernel UDP backend on a
// free port shared by the example's two devices.
func openLoopback(addr string, port uint16) *verbs.Device {
	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddr(addr), Port: port})
	if err != nil {
		panic(err)
	}
	return verbs.Open(l, verbs.Inline())
}

func freePort() uint16 {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// Example connects two devices on the loopback interface through the CM,
// with private data both ways, and sends one message over the connection.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort()
	client, server := openLoopback("127.0.0.1", port), openLoopback("127.0.0.2", port)
	defer client.Close()
	defer server.Close()

	// One CM per device; each creates its device's QP1.
	cc, err := rdmacm.Open(client, rdmacm.Config{})
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	sc, err := rdmacm.Open(server, rdmacm.Config{})
	if err != nil {
		panic(err)
	}
	defer sc.Close()

	// newQP makes an RC QP, in INIT, with a receive posted.
	newQP := func(d *verbs.Device) (*verbs.QueuePair, *verbs.CQ, *verbs.MR) {
		pd := d.AllocPD()
		cq := d.CreateCQ(16)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxInline: 64}})
		if err != nil {
			panic(err)
		}
		mr, err := pd.AllocMR(4096, verbs.AccessLocalWrite)
		if err != nil {
			panic(err)
		}
		if err := rdmacm.InitQP(q, 0); err != nil {
			panic(err)
		}
		if err := q.PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{mr.SGE(0, 4096)}}); err != nil {
			panic(err)
		}
		return q, cq, mr
	}

	l, err := sc.Listen(7174)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	type side struct {
		c  *rdmacm.Conn
		cq *verbs.CQ
		mr *verbs.MR
	}
	accepted := make(chan side)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request from %v: %q\n", req.Remote.Addr(), req.PrivateData[:5])
		q, cq, mr := newQP(server)
		c, err := req.Accept(ctx, q, &rdmacm.Params{PrivateData: []byte("welcome")})
		if err != nil {
			panic(err)
		}
		accepted <- side{c, cq, mr}
	}()

	q, _, _ := newQP(client)
	c, err := cc.Dial(ctx, netip.MustParseAddrPort("127.0.0.2:7174"), q, &rdmacm.Params{PrivateData: []byte("hello")})
	if err != nil {
		panic(err)
	}
	fmt.Printf("connected, QP in %v: %q\n", c.QP().State(), c.PrivateData()[:7])
	s := <-accepted

	// The QP is an ordinary RC QP now.
	if err := c.QP().PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: []byte("ping")}); err != nil {
		panic(err)
	}
	var wc [1]verbs.WC
	if _, err := s.cq.Wait(ctx, wc[:]); err != nil || wc[0].Status != verbs.WCSuccess {
		panic(fmt.Sprint(err, wc[0].Status))
	}
	fmt.Printf("server received %q\n", s.mr.Buf()[:wc[0].ByteLen])

	c.Disconnect()
	<-s.c.Done()
	fmt.Println("disconnected")
	// Output:
	// request from 127.0.0.1: "hello"
	// connected, QP in RTS: "welcome"
	// server received "ping"
	// disconnected
}
