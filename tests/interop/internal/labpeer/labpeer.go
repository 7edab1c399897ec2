// Package labpeer is the uroce side of the lab's small C programs
// (tests/interop/testdata): the TCP exchange that connects one RC or UC
// QP to theirs, the line protocol that paces the two, and completions
// checked one by one.
package labpeer

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"

	"github.com/uroce/uroce/verbs"
)

// Session is a QP connected to a C program's, and the TCP connection that
// paces them.
type Session struct {
	conn net.Conn
	in   *bufio.Reader
	// RemoteAddr and RemoteRKey are the peer's region, as its line gave
	// them.
	RemoteAddr uint64
	RemoteRKey uint32
}

// Connect dials the C program at peer (it always listens), swaps the
// "QPN PSN GID ADDR RKEY" lines, connects q with opts (PSN filled in),
// and swaps "rts", so that neither side sends before the other's QP
// receives: a request that reaches a QP still in INIT is dropped.
func Connect(ctx context.Context, d *verbs.Device, q *verbs.QueuePair, mr *verbs.MR, peer string, opts verbs.ConnectOptions) (*Session, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", peer)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	s := &Session{conn: c, in: bufio.NewReader(c)}
	gid := d.GIDs()[0].As16()
	psn := rand.Uint32() & 0xffffff
	fmt.Fprintf(c, "%06x %06x %s %016x %08x\n", q.QPN(), psn, hex.EncodeToString(gid[:]), mr.Addr(), mr.RKey())
	line, err := s.in.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the peer's address: %w", err)
	}
	var rqpn, rpsn uint32
	var rgid string
	if _, err := fmt.Sscanf(line, "%x %x %s %x %x", &rqpn, &rpsn, &rgid, &s.RemoteAddr, &s.RemoteRKey); err != nil {
		c.Close()
		return nil, fmt.Errorf("bad address line %q: %w", line, err)
	}
	g, err := hex.DecodeString(rgid)
	if err != nil || len(g) != 16 {
		c.Close()
		return nil, fmt.Errorf("bad GID %q", rgid)
	}
	fmt.Printf("local:  QPN %06x PSN %06x GID %v addr %#x rkey %08x\n", q.QPN(), psn, d.GIDs()[0], mr.Addr(), mr.RKey())
	fmt.Printf("remote: QPN %06x PSN %06x GID %s addr %#x rkey %08x\n", rqpn, rpsn, rgid, s.RemoteAddr, s.RemoteRKey)
	opts.PSN = psn
	if err := q.Connect(verbs.Endpoint{Addr: netip.AddrFrom16([16]byte(g)).Unmap(), QPN: rqpn, PSN: rpsn}, opts); err != nil {
		c.Close()
		return nil, err
	}
	if err := s.Say("rts"); err != nil {
		c.Close()
		return nil, err
	}
	if err := s.Expect("rts"); err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the TCP connection.
func (s *Session) Close() error { return s.conn.Close() }

// Say sends one line.
func (s *Session) Say(line string) error {
	_, err := fmt.Fprintf(s.conn, "%s\n", line)
	return err
}

// Line reads one line, without its newline.
func (s *Session) Line() (string, error) {
	l, err := s.in.ReadString('\n')
	return strings.TrimSpace(l), err
}

// Expect reads one line and fails unless it is want.
func (s *Session) Expect(want string) error {
	l, err := s.Line()
	if err != nil {
		return fmt.Errorf("waiting for %q: %w", want, err)
	}
	if l != want {
		return fmt.Errorf("peer said %q, want %q", l, want)
	}
	return nil
}

// Wait waits for cq's next completion and checks it is WR id's, of opcode
// op when it succeeded, and, when wantOK, that it succeeded.
func Wait(ctx context.Context, cq *verbs.CQ, id uint64, op verbs.WCOpcode, wantOK bool) (verbs.WC, error) {
	var wc [1]verbs.WC
	for {
		k, err := cq.Wait(ctx, wc[:])
		if err != nil {
			return wc[0], err
		}
		if k == 0 {
			continue
		}
		w := wc[0]
		switch {
		case wantOK && w.Status != verbs.WCSuccess:
			return w, fmt.Errorf("wr_id %d: status %v (%d)", w.WRID, w.Status, w.Status)
		case w.WRID != id:
			return w, fmt.Errorf("completion for wr_id %d, want %d", w.WRID, id)
		case w.Status == verbs.WCSuccess && w.Opcode != op:
			return w, fmt.Errorf("wr_id %d: opcode %v, want %v", w.WRID, w.Opcode, op)
		}
		return w, nil
	}
}
