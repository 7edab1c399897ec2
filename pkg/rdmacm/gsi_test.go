package rdmacm

import (
	"net"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
)

// udpPair opens two devices on 127.0.0.1 and 127.0.0.2 with the kernel UDP
// backend on a free port, each with a CM over its GSI QP: the whole stack,
// MADs and data, through real sockets (no root).
func udpPair(t *testing.T, cfg Config) (a, b *side) {
	t.Helper()
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	var devs []*verbs.Device
	for try := 0; len(devs) < 2 && try < 20; try++ {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addrs[0], 0)))
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
		c.Close()
		devs = devs[:0]
		for _, a := range addrs {
			l, err := udp.Open(udp.Config{Addr: a, Port: port})
			if err != nil {
				break
			}
			devs = append(devs, verbs.Open(l, verbs.Inline()))
		}
		if len(devs) < 2 {
			for _, d := range devs {
				d.Close()
			}
			devs = nil
		}
	}
	if len(devs) < 2 {
		t.Fatal("no free port for a loopback pair")
	}
	mk := func(d *verbs.Device) *side {
		m, err := Open(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := &side{dev: d, cm: m, pd: d.AllocPD(), cq: d.CreateCQ(64)}
		s.mr, err = s.pd.AllocMR(64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			m.Close()
			d.Close()
		})
		return s
	}
	return mk(devs[0]), mk(devs[1])
}

// TestGSIEndToEnd: Dial, Accept, SEND/WRITE/READ both ways and Disconnect
// with every MAD a UD datagram between the two devices' QP1s.
func TestGSIEndToEnd(t *testing.T) {
	for _, mode := range []string{"inline", "background"} {
		t.Run(mode, func(t *testing.T) {
			a, b := udpPair(t, fastCM)
			if mode == "background" {
				a.dev.Start()
				b.dev.Start()
			}
			ca, cb := connect(t, a, b, 7174, []byte("ping"), []byte("pong"))
			expectEvents(t, ca, EventEstablished)
			expectEvents(t, cb, EventEstablished)
			exchange(t, a, b, ca, cb)
			exchange(t, b, a, cb, ca)
			if err := cb.Disconnect(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*Conn{ca, cb} {
				expectEvents(t, c, EventDisconnected, EventTimewaitExit)
			}
			// A second connection on new QPs after the first is over.
			ca, cb = connect(t, a, b, 7175, nil, nil)
			exchange(t, a, b, ca, cb)
			if err := ca.Disconnect(); err != nil {
				t.Fatal(err)
			}
			<-cb.Done()
			if c := a.cm.Counters(); c.Malformed != 0 || c.SendErrors != 0 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

// TestGSIGarbage: datagrams of every size and content sent to QP1 from an
// ordinary UD QP of the peer device (with the GSI Q_Key) while a
// connection is up reach the CM as what they are and change nothing: no
// event, data still flows, the CM counts them.
func TestGSIGarbage(t *testing.T) {
	a, b := udpPair(t, fastCM)
	ca, cb := connect(t, a, b, 7174, nil, nil)
	expectEvents(t, ca, EventEstablished)
	expectEvents(t, cb, EventEstablished)

	cq := a.dev.CreateCQ(64)
	ud, err := a.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ud.ActivateUD(verbs.GSIQKey, 0); err != nil {
		t.Fatal(err)
	}
	ah, err := a.pd.CreateAH(verbs.AHAttr{DGID: b.dev.Addr(), HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	before := b.cm.Counters()
	sizes := []int{1, 23, 24, 100, 255, 256, 257, 700}
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i*31 + j*7)
		}
		if n >= 24 {
			// A CM class header, so the MAD gets past the first checks.
			p[0], p[1], p[2] = 1, byte(mad.ClassCM), 2
		}
		if err := ud.PostSend(&verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendInline | verbs.SendSignaled,
			InlineData: p, AH: ah, RemoteQPN: mad.GSIQPN, RemoteQKey: verbs.GSIQKey}); err != nil {
			t.Fatalf("%d-byte datagram: %v", n, err)
		}
	}
	// Every datagram that fits QP1's receives (the GRH and 256 bytes)
	// reaches the CM, which finds each malformed; the two larger ones
	// are dropped by QP1, as rxe's would be.
	const fit = 6
	waitFor(t, func() bool { return b.cm.Counters().MADsIn-before.MADsIn >= fit })
	if c := b.cm.Counters(); c.Malformed-before.Malformed != fit || c.MADsIn-before.MADsIn != fit {
		t.Errorf("counters before %+v, after %+v", before, c)
	}
	for _, c := range []*Conn{ca, cb} {
		select {
		case e := <-c.Events():
			t.Fatalf("event %v after garbage", e.Type)
		default:
		}
	}
	exchange(t, a, b, ca, cb)
	// QP1 still receives: a second connection comes up.
	connect(t, a, b, 7175, nil, nil)
}
