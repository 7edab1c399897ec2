package afxdp

import (
	"fmt"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/xdp"
)

func init() { link.Register("afxdp", open) }

// waitModes maps the backend-neutral wait to this link's.
var waitModes = [...]WaitMode{
	link.WaitSleep:         WaitPoll,
	link.WaitSpin:          WaitBusyPoll,
	link.WaitSpinThenSleep: WaitHybrid,
}

// bindModes maps the backend-neutral bind mode to the socket's.
var bindModes = [...]xdp.BindMode{
	link.BindAuto:     xdp.BindAuto,
	link.BindCopy:     xdp.BindCopy,
	link.BindZeroCopy: xdp.BindZeroCopy,
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
	if int(cfg.Bind) >= len(bindModes) {
		return nil, fmt.Errorf("bind mode %d: %w", cfg.Bind, ErrConfig)
	}
	l, err := Open(Config{Interface: cfg.Interface, Addr: cfg.Addr, Wait: waitModes[cfg.Wait], BindMode: bindModes[cfg.Bind]})
	if err != nil {
		return nil, err
	}
	return l, nil
}
