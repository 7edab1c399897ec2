package udp

import "github.com/uroce/uroce/pkg/link"

// The udp backend is link.Default, registered for every program that
// imports this package (package verbs does).
func init() { link.Register("udp", open) }

// open is the backend's link.Opener: a socket on cfg.Addr; the kernel
// routes, so cfg.Interface is not needed, and Wait always sleeps in
// poll(2).
func open(cfg link.Config) (link.Link, error) {
	l, err := Open(Config{Addr: cfg.Addr})
	if err != nil {
		return nil, err
	}
	return l, nil
}
