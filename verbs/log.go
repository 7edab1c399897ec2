package verbs

import (
	"context"
	"log/slog"

	"github.com/uroce/uroce/qp"
)

// SetLogger makes the device log its QPs' state changes to l, off the data
// path: each record carries the QP's number (qpn), its peer's address and
// QP number (peer, peer_qpn, empty and 0 before RTR), and the states
// (from, to).
//
// A move made by Modify (Connect's RESET→INIT→RTR→RTS, an application's
// move to ERR or RESET) is logged at Debug with the message "qp state". A
// move the engine makes on an error is logged at Warn with the message
// "qp error": a send WR that failed (retry or RNR retry exceeded, a remote
// access or invalid request error) adds its status and wr_id; a request
// the QP answered with an error NAK adds nothing more.
//
// A device logs nothing until it is given a logger, like libibverbs, which
// prints nothing: errors reach the application as completion statuses and
// returned errors. SetLogger(nil) stops logging. The handler runs on the
// goroutine that drives the engine, so it should not block for long.
func (d *Device) SetLogger(l *slog.Logger) {
	var fn func(*qp.StateChange)
	if l != nil {
		fn = func(c *qp.StateChange) { logStateChange(l, c) }
	}
	d.withEngine(func() error { d.e.OnStateChange = fn; return nil })
}

func logStateChange(l *slog.Logger, c *qp.StateChange) {
	level, msg := slog.LevelDebug, "qp state"
	if !c.ByModify {
		level, msg = slog.LevelWarn, "qp error"
	}
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	a := c.QP.Attr()
	peer := ""
	if a.DestAddr.IsValid() {
		peer = a.DestAddr.Unmap().String()
	}
	attrs := [8]slog.Attr{
		slog.Uint64("qpn", uint64(c.QP.QPN())),
		slog.String("peer", peer),
		slog.Uint64("peer_qpn", uint64(a.DestQPN)),
		slog.String("from", c.From.String()),
		slog.String("to", c.To.String()),
	}
	n := 5
	if c.Failed {
		attrs[n], attrs[n+1] = slog.String("status", c.Status.String()), slog.Uint64("wr_id", c.WRID)
		n += 2
	}
	l.LogAttrs(ctx, level, msg, attrs[:n]...)
}
