package cm_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// wire queues MADs between two managers; a real verbs layer sends them as
// UD SEND Only packets to QP1 instead.
type wire struct {
	from mad.GID
	q    *[]queued
}

type queued struct {
	src cm.Address
	to  mad.GID
	b   []byte
}

func (w wire) SendMAD(dst cm.Address, b []byte) error {
	*w.q = append(*w.q, queued{cm.Address{GID: w.from, QPN: mad.GSIQPN, QKey: mad.GSIQKey}, dst.GID, bytes.Clone(b)})
	return nil
}

// qpLog stands in for the verbs layer's Modify QP.
type qpLog string

func (q qpLog) ModifyQP(_ time.Time, to cm.QPState, a *cm.QPAttr) error {
	fmt.Printf("%s: QP %#x to %v (remote QP %#x, send PSN %#x)\n", q, a.QPN, to, a.DestQPN, a.SQPSN)
	return nil
}

func Example() {
	now := time.Unix(0, 0)
	var q []queued
	client := mad.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	server := mad.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))
	mc, _ := cm.New(cm.Config{GID: client, Send: wire{client, &q}, QP: qpLog("client"), Seed: 1})
	ms, _ := cm.New(cm.Config{GID: server, Send: wire{server, &q}, QP: qpLog("server"), Seed: 2})
	managers := map[mad.GID]*cm.Manager{client: mc, server: ms}

	svc := mad.IPServiceID(mad.PortSpaceTCP, 7174)
	ms.Listen(svc)
	mc.Connect(now, &cm.ConnectParams{ServiceID: svc, Dest: server, QPN: 0x11, StartingPSN: 0x100, PathMTU: mad.MTU1024, RetryCount: 7, RNRRetryCount: 7})

	for len(q) > 0 {
		d := q[0]
		q = q[1:]
		fmt.Println(mad.MAD(d.b).Header().AttrID())
		m := managers[d.to]
		m.HandleMAD(now, d.src, d.b)
		for _, e := range m.PollEvents(nil) {
			fmt.Println(e.Type)
			if e.Type == cm.EventConnectRequest {
				e.Conn.Accept(now, &cm.AcceptParams{QPN: 0x22, StartingPSN: 0x200, RNRRetryCount: 7})
			}
		}
	}
	// Output:
	// REQ
	// CONNECT_REQUEST
	// server: QP 0x22 to RTR (remote QP 0x11, send PSN 0x100)
	// server: QP 0x22 to RTS (remote QP 0x11, send PSN 0x100)
	// REP
	// client: QP 0x11 to RTR (remote QP 0x22, send PSN 0x200)
	// client: QP 0x11 to RTS (remote QP 0x22, send PSN 0x200)
	// ESTABLISHED
	// RTU
	// ESTABLISHED
}
