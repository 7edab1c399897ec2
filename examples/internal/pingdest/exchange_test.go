package pingdest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExchangeTimeout: a peer that connects (or accepts) and then says
// nothing ends the exchange on either side in ErrExchangeTimeout, with the
// peer's address in the message, instead of a wait forever.
func TestExchangeTimeout(t *testing.T) {
	ctx := context.Background()
	const to = 100 * time.Millisecond

	// The client facing a silent server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(10 * to)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = Exchange(ctx, Config{Peer: "127.0.0.1", Port: port, Timeout: to}, Dest{}, nil)
	if !errors.Is(err, ErrExchangeTimeout) {
		t.Errorf("client facing a silent server: %v, want ErrExchangeTimeout", err)
	}

	// The server facing a silent client.
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := sl.Addr().String()
	go func() {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			defer c.Close()
			time.Sleep(10 * to)
		}
	}()
	connect := func(Dest) error { t.Error("connect ran without a peer address"); return nil }
	_, err = Exchange(ctx, Config{Listener: sl, Timeout: to}, Dest{}, connect)
	if !errors.Is(err, ErrExchangeTimeout) {
		t.Errorf("server facing a silent client: %v, want ErrExchangeTimeout", err)
	}
	if err != nil && !containsAll(err.Error(), "127.0.0.1:", strconv.Itoa(int(to/time.Millisecond))+"ms") {
		t.Errorf("message %q lacks the peer or the timeout", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
