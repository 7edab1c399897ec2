package afpacket

import (
	"fmt"

	"github.com/uroce/uroce/pkg/link"
)

func init() { link.Register("afpacket", open) }

// open is the backend's link.Opener: a raw socket on cfg.Interface,
// sending from cfg.Addr. Wait always sleeps in poll(2).
func open(cfg link.Config) (link.Link, error) {
	if cfg.Interface == "" {
		return nil, fmt.Errorf("afpacket: %w", link.ErrNoInterface)
	}
	l, err := Open(Config{Ifname: cfg.Interface, Addr: cfg.Addr})
	if err != nil {
		return nil, err
	}
	return l, nil
}
