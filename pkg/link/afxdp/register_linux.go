package afxdp

import (
	"fmt"

	"github.com/uroce/uroce/pkg/link"
)

func init() { link.Register("afxdp", open) }

// waitModes maps the backend-neutral wait to this link's.
var waitModes = [...]WaitMode{
	link.WaitSleep:         WaitPoll,
	link.WaitSpin:          WaitBusyPoll,
	link.WaitSpinThenSleep: WaitHybrid,
}

// open is the backend's link.Opener: AF_XDP sockets on every receive
// queue of cfg.Interface, sending from cfg.Addr (zero: the interface's
// first address).
func open(cfg link.Config) (link.Link, error) {
	if cfg.Interface == "" {
		return nil, fmt.Errorf("afxdp: %w", link.ErrNoInterface)
	}
	if int(cfg.Wait) >= len(waitModes) {
		return nil, fmt.Errorf("wait mode %d: %w", cfg.Wait, ErrConfig)
	}
	l, err := Open(Config{Interface: cfg.Interface, Addr: cfg.Addr, Wait: waitModes[cfg.Wait]})
	if err != nil {
		return nil, err
	}
	return l, nil
}
