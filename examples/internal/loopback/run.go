package loopback

import (
	"context"

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
