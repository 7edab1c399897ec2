package rsocket_test

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

// TestNetConn runs x/net's conformance suite for net.Conn: basic and
// ping-pong I/O, racing reads, writes and closes, deadlines, and
// concurrent methods.
func TestNetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		la, lb := pipe.New(pipe.Config{Buffers: 4096})
		da, db := verbs.Open(la), verbs.Open(lb)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := rsocket.Listen(ctx, db, ":7471")
		if err != nil {
			return nil, nil, nil, err
		}
		defer l.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := l.Accept()
			accepted <- c
		}()
		client, err := rsocket.Dial(ctx, da, db.Addr().String()+":7471")
		if err != nil {
			return nil, nil, nil, err
		}
		server := <-accepted
		stop = func() {
			client.Close()
			if server != nil {
				server.Close()
			}
			da.Close()
			db.Close()
		}
		return client, server, stop, nil
	})
}
