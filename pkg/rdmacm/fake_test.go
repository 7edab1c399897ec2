package rdmacm

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// hub is an in-memory network of QP1s: a MAD sent to a GID arrives on
// that end's Incoming, as many times as the filter says.
type hub struct {
	mu     sync.Mutex
	ends   map[mad.GID]*fakeEnd
	filter func(src, dst mad.GID, m mad.MAD) int // copies delivered; nil means 1
	sent   []mad.MAD                             // every MAD sent, in order
}

type fakeEnd struct {
	h   *hub
	gid mad.GID
	in  chan datagram
}

func newHub() *hub { return &hub{ends: map[mad.GID]*fakeEnd{}} }

func (h *hub) end(a netip.Addr) *fakeEnd {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := &fakeEnd{h: h, gid: mad.GIDFromAddr(a), in: make(chan datagram, 64)}
	h.ends[e.gid] = e
	return e
}

func (h *hub) setFilter(f func(src, dst mad.GID, m mad.MAD) int) {
	h.mu.Lock()
	h.filter = f
	h.mu.Unlock()
}

// inject delivers b to dst as if src had sent it.
func (h *hub) inject(src, dst netip.Addr, b []byte) {
	h.mu.Lock()
	e := h.ends[mad.GIDFromAddr(dst)]
	h.mu.Unlock()
	e.in <- datagram{src: cm.Address{GID: mad.GIDFromAddr(src), QPN: mad.GSIQPN, QKey: mad.GSIQKey, PKey: 0xffff}, b: bytes.Clone(b)}
}

// sentOf returns copies of the MADs sent with attribute a.
func (h *hub) sentOf(a mad.AttrID) []mad.MAD {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []mad.MAD
	for _, m := range h.sent {
		if m.Header().AttrID() == a {
			out = append(out, m)
		}
	}
	return out
}

func (e *fakeEnd) SendMAD(dst cm.Address, b []byte) error {
	h := e.h
	h.mu.Lock()
	m := mad.MAD(bytes.Clone(b))
	h.sent = append(h.sent, m)
	n := 1
	if h.filter != nil {
		n = h.filter(e.gid, dst.GID, m)
	}
	to := h.ends[dst.GID]
	h.mu.Unlock()
	for range n {
		if to == nil {
			break
		}
		select {
		case to.in <- datagram{src: cm.Address{GID: e.gid, QPN: mad.GSIQPN, QKey: mad.GSIQKey, PKey: 0xffff}, b: bytes.Clone(b)}:
		default: // a full receive queue drops, as QP1's would
		}
	}
	return nil
}

func (e *fakeEnd) Incoming() <-chan datagram { return e.in }
func (e *fakeEnd) Close() error              { return nil }

// fastCM makes the CM's timers short so retries and time-wait end within
// a test: CM response timeout 4 ms, 3 retries, a local ACK timeout of a
// few ms (time-wait's length).
var fastCM = Config{CM: cm.Config{CMResponseTimeout: 10, MaxCMRetries: 3, TargetACKDelay: 10, PacketLifetime: 10}}

// side is one device of a test with its CM.
type side struct {
	dev *verbs.Device
	cm  *CM
	pd  *verbs.PD
	cq  *verbs.CQ
	mr  *verbs.MR
}

// pipePair opens two devices over a pipe (the RC data path) whose CMs
// talk over the hub (the MAD path).
func pipePair(t *testing.T, cfg Config) (a, b *side, h *hub) {
	t.Helper()
	la, lb := pipe.New(pipe.Config{})
	h = newHub()
	mk := func(l *pipe.Link) *side {
		d := verbs.Open(l, verbs.Inline())
		d.Start()
		m, err := open(h.end(d.Addr()), d.Addr(), d.MaxPathMTU(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := &side{dev: d, cm: m, pd: d.AllocPD(), cq: d.CreateCQ(64)}
		s.mr, err = s.pd.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			m.Close()
			d.Close()
		})
		return s
	}
	return mk(la), mk(lb), h
}

func (s *side) qp(t *testing.T) *verbs.QueuePair {
	t.Helper()
	q, err := s.pd.CreateQP(&verbs.QPInit{SendCQ: s.cq, RecvCQ: s.cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxInline: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// wc waits for one completion.
func (s *side) wc(t *testing.T) verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]verbs.WC
	if _, err := s.cq.Wait(ctx, wc[:]); err != nil {
		t.Fatalf("waiting for a completion: %v", err)
	}
	return wc[0]
}

// ctx returns a context for one step of a test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// connect dials from a to b's listener on port and accepts there with
// the given private data, returning both connections.
func connect(t *testing.T, a, b *side, port uint16, dialPD, acceptPD []byte) (ca, cb *Conn) {
	t.Helper()
	return connectWith(t, a, b, port, &Params{PrivateData: dialPD}, &Params{PrivateData: acceptPD})
}

// connectWith dials from a to b's listener on port with dialP and
// accepts there with acceptP, returning both connections.
func connectWith(t *testing.T, a, b *side, port uint16, dialP, acceptP *Params) (ca, cb *Conn) {
	t.Helper()
	l, err := b.cm.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	qb := b.qp(t)
	type res struct {
		c   *Conn
		req *ConnRequest
		err error
	}
	done := make(chan res, 1)
	go func() {
		req, err := l.Accept(ctx(t))
		if err != nil {
			done <- res{err: err}
			return
		}
		c, err := req.Accept(ctx(t), qb, acceptP)
		done <- res{c, req, err}
	}()
	ca, err = a.cm.Dial(ctx(t), netip.AddrPortFrom(b.dev.Addr(), port), a.qp(t), dialP)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	return ca, r.c
}
