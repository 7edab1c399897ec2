package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

// Example connects two devices (on an in-memory link; use
// verbs.OpenAddr for a real interface) with an rsocket stream and uses
// it as any net.Conn.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	la, lb := pipe.New(pipe.Config{}) // 10.0.0.1 and 10.0.0.2
	client, server := verbs.Open(la), verbs.Open(lb)
	defer client.Close()
	defer server.Close()

	l, err := rsocket.Listen(ctx, server, ":7471")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client's CloseWrite
	}()

	c, err := rsocket.Dial(ctx, client, "10.0.0.2:7471")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Fprint(c, "hello over RDMA")
	c.CloseWrite()
	echo, err := io.ReadAll(c)
	fmt.Printf("%s, %v (to %v)\n", echo, err, c.RemoteAddr())
	// Output:
	// hello over RDMA, <nil> (to 10.0.0.2:7471)
}
