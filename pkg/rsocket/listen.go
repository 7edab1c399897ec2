package rsocket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// cmRef shares one rdmacm.CM among a device's listeners and connections:
// a device has one GSI QP, so one CM.
type cmRef struct {
	dev  *verbs.Device
	cm   *rdmacm.CM
	refs int
	// graves are closed streams whose QPs wait for the CM to leave
	// time-wait (see Conn.Close); freed by later calls on the device, or
	// all with the CM.
	graves []*Conn
}

var cms = struct {
	sync.Mutex
	m map[*verbs.Device]*cmRef
}{m: map[*verbs.Device]*cmRef{}}

// acquireCM returns dev's CM, opening it (and starting the device's
// engine goroutine, which a blocking stream needs) on first use.
func acquireCM(dev *verbs.Device) (*cmRef, error) {
	cms.Lock()
	defer cms.Unlock()
	if r := cms.m[dev]; r != nil {
		r.refs++
		r.sweep()
		return r, nil
	}
	dev.Start()
	m, err := rdmacm.Open(dev, rdmacm.Config{})
	if err != nil {
		return nil, err
	}
	r := &cmRef{dev: dev, cm: m, refs: 1}
	cms.m[dev] = r
	return r, nil
}

// release drops a reference; the last one closes the CM.
func (r *cmRef) release() {
	cms.Lock()
	defer cms.Unlock()
	if r.refs--; r.refs == 0 {
		delete(cms.m, r.dev)
		r.cm.Close()
		for _, c := range r.graves {
			c.free()
		}
		r.graves = nil
	}
}

// bury keeps a closed stream's QP until its connection leaves time-wait.
func (r *cmRef) bury(c *Conn) {
	cms.Lock()
	defer cms.Unlock()
	r.graves = append(r.graves, c)
	r.sweep()
}

// sweep frees the buried streams whose connections left time-wait, with
// cms held.
func (r *cmRef) sweep() {
	keep := r.graves[:0]
	for _, c := range r.graves {
		if c.timewaitOver() {
			c.free()
		} else {
			keep = append(keep, c)
		}
	}
	clear(r.graves[len(keep):])
	r.graves = keep
}

// Listener accepts rsocket streams on one rdma_cm port of a device
// (rlisten, raccept).
type Listener struct {
	dev    *verbs.Device
	ref    *cmRef
	l      *rdmacm.Listener
	addr   Addr
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen listens on addr, "ip:port" or ":port", where ip, if given, must
// be the device's address. The device's engine is started (Device.Start)
// and its CM opened, shared by every Listener and Conn on it. ctx bounds
// the setup only.
func Listen(ctx context.Context, dev *verbs.Device, addr string) (*Listener, error) {
	ap, err := parseAddr(addr)
	if err == nil && ap.Addr().IsValid() && !ap.Addr().IsUnspecified() && ap.Addr() != dev.Addr().Unmap() {
		err = fmt.Errorf("rsocket: %v is not the device's address %v", ap.Addr(), dev.Addr())
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	ref, err := acquireCM(dev)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	rl, err := ref.cm.Listen(ap.Port())
	if err != nil {
		ref.release()
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	l := &Listener{dev: dev, ref: ref, l: rl, addr: Addr{netip.AddrPortFrom(dev.Addr().Unmap(), ap.Port())}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// Accept waits for the next stream; it is AcceptRsocket as a net.Conn.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptRsocket()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptRsocket waits for the next stream (rs_accept): it answers a
// connect request whose private data is rsocket's with its own, and
// rejects any other, as rsocket.c does.
func (l *Listener) AcceptRsocket() (*Conn, error) {
	for {
		req, err := l.l.Accept(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil {
				err = net.ErrClosed
			}
			return nil, l.opError(err)
		}
		peer, err := ParseConnData(req.PrivateData)
		if err != nil {
			req.Reject(nil)
			continue
		}
		l.ref.acquire()
		c, err := newConn(l.dev, l.ref)
		if err != nil {
			l.ref.release()
			req.Reject(nil)
			return nil, l.opError(err)
		}
		rc, err := req.Accept(l.ctx, c.qp, &rdmacm.Params{PrivateData: c.connData(), FlowControl: true})
		if err != nil {
			c.free()
			l.ref.release()
			if l.ctx.Err() != nil {
				return nil, l.opError(net.ErrClosed)
			}
			continue // the peer went away; wait for the next
		}
		c.established(rc, peer)
		return c, nil
	}
}

func (l *Listener) opError(err error) error {
	return &net.OpError{Op: "accept", Net: network, Addr: l.addr, Err: err}
}

// Close stops listening; a blocked Accept returns net.ErrClosed.
// Accepted streams stay open.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.opError(net.ErrClosed)
	}
	l.cancel()
	err := l.l.Close()
	l.ref.release()
	return err
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.addr }

// acquire adds a reference to a CM already held.
func (r *cmRef) acquire() {
	cms.Lock()
	r.refs++
	r.sweep()
	cms.Unlock()
}

// Dial connects to an rsocket listener at addr, "ip:port", from dev
// (rsocket, rconnect): it starts the device's engine, opens or shares
// its CM, and makes the connection under ctx.
func Dial(ctx context.Context, dev *verbs.Device, addr string) (*Conn, error) {
	ap, err := parseAddr(addr)
	if err == nil && !ap.Addr().IsValid() {
		err = errors.New("rsocket: dial needs an IP address")
	}
	raddr := Addr{ap}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	ref, err := acquireCM(dev)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	c, err := newConn(dev, ref)
	if err != nil {
		ref.release()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	rc, err := ref.cm.Dial(ctx, ap, c.qp, &rdmacm.Params{PrivateData: c.connData(), FlowControl: true})
	if err != nil {
		c.free()
		ref.release()
		if errors.Is(err, context.DeadlineExceeded) {
			err = timeoutError{err} // net.OpError asks its Err itself
		}
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	peer, err := ParseConnData(rc.PrivateData())
	if err != nil {
		rc.Disconnect()
		c.free()
		ref.release()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: fmt.Errorf("%w: %w", ErrProtocol, err)}
	}
	c.established(rc, peer)
	return c, nil
}

// timeoutError marks an error as a timeout for net.Error.
type timeoutError struct{ error }

func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error { return e.error }
