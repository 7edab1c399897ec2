package loopback

import (
	"context"
	"net"

	"github.com/uroce/uroce/verbs"
)

// Run runs a program's server and client against each other, as the
// examples' tests do: it opens a pair (a free port), starts server on B's
// device, and once the server calls listening runs client on A's device;
// then it waits for the server. Each function owns its device (the
// programs close theirs). A server that returns before it listens is
// returned with a nil client error, the client never run.
func Run(ctx context.Context, server func(d *verbs.Device, listening func()) error, client func(d *verbs.Device) error) (serverErr, clientErr error) {
	cliDev, srvDev, err := Pair(0)
	if err != nil {
		return err, nil
	}
	listening := make(chan struct{})
	srvDone := make(chan error, 1)
	go func() { srvDone <- server(srvDev, func() { close(listening) }) }()
	select {
	case <-listening:
	case err := <-srvDone:
		cliDev.Close()
		return err, nil
	}
	clientErr = client(cliDev)
	return <-srvDone, clientErr
}

// RunTCP is Run for the programs that swap addresses over TCP before they
// connect (the pingpongs): the server gets a listener on 127.0.0.1, the
// client its port. The listener is closed when the server returns, so the
// client of a server that failed early does not wait for it.
func RunTCP(ctx context.Context, server func(d *verbs.Device, ln net.Listener) error, client func(d *verbs.Device, port int) error) (serverErr, clientErr error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err, nil
	}
	port := ln.Addr().(*net.TCPAddr).Port
	serverErr, clientErr = Run(ctx, func(d *verbs.Device, listening func()) error {
		listening() // the listener is there already
		defer ln.Close()
		return server(d, ln)
	}, func(d *verbs.Device) error { return client(d, port) })
	ln.Close() // the server's, or the one no server got (no pair)
	return serverErr, clientErr
}
