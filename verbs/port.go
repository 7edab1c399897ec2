package verbs

import (
	"net"

	"github.com/uroce/uroce/pkg/netinfo"
)

// PortState is a port's logical state (ibv_port_state, rdma-core's
// values). A uroce port is only ever down or active, as rxe's is.
type PortState uint8

const (
	PortDown   PortState = 1
	PortActive PortState = 4
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "PORT_DOWN"
	case PortActive:
		return "PORT_ACTIVE"
	}
	return "PORT_UNKNOWN"
}

// PortAttr are a port's attributes (ibv_port_attr), those uroce has.
type PortAttr struct {
	State PortState
	// MaxMTU and ActiveMTU are the largest path MTU the link carries, in
	// bytes (rxe's max_mtu and active_mtu follow its netdev's MTU).
	MaxMTU, ActiveMTU int
	// GIDTblLen is the length of the GID table (GID).
	GIDTblLen int
	// Netdev is the interface whose state the port follows, or "" when
	// it follows none (see QueryPort).
	Netdev string
}

// QueryPort returns the attributes of the device's one port
// (ibv_query_port of port 1).
//
// The port is active while the interface the link is bound to is up with
// carrier, as rxe's is while its netdev is (netif_running and
// netif_carrier_ok): for the afpacket and afxdp backends the named
// interface, for the udp backend the interface holding the bound address.
// Each time it goes down the device counts it (Counters' LinkDowned, rxe's
// link_downed) and reports EventPortErr (GetAsyncEvent); EventPortActive
// when it comes back. A port opened on an interface that is down starts
// down without counting or reporting (rxe counts one then too); from then
// on each change counts, however many times the kernel announces the same
// one.
//
// QPs are left alone while the port is down, as rxe leaves them: packets
// do not go out (the link's send errors count them), so an RC QP's
// retries may run out and fail its WRs with WCRetryExcErr.
//
// A link with no interface of its own is always active and Netdev is "":
// pipe links, links on the loopback device, a udp link whose address no
// interface holds, and any link whose interface could not be followed
// (the netlink subscription failed).
func (d *Device) QueryPort() PortAttr {
	a := PortAttr{State: PortActive, MaxMTU: d.MaxPathMTU(), ActiveMTU: d.MaxPathMTU(), GIDTblLen: len(d.GIDs())}
	if d.port != nil {
		a.Netdev = d.port.Interface().Name
		if !d.port.Up() {
			a.State = PortDown
		}
	}
	return a
}

// watchPort starts following the link's interface, if it has one (see
// QueryPort). It runs in Open, on the caller's thread, whose network
// namespace is the link's.
func (d *Device) watchPort() {
	info := d.l.Info()
	opt := netinfo.WatchOptions{OnChange: d.portChanged}
	switch info.Kind {
	case "afpacket", "afxdp":
		ifi, err := net.InterfaceByName(info.Name)
		if err != nil || ifi.Flags&net.FlagLoopback != 0 {
			return
		}
		opt.Index = ifi.Index
	case "udp":
		if a := info.Addr.Unmap(); a.IsLoopback() || a.IsUnspecified() {
			return
		}
		ifi, err := netinfo.InterfaceByAddr(nil, info.Addr)
		if err != nil || ifi.Loopback {
			return
		}
		opt.Index = ifi.Index
	default:
		return
	}
	w, err := netinfo.WatchLink(opt)
	if err != nil {
		return
	}
	d.port = w
}

// portChanged runs on the watch's goroutine at each change of the
// interface's state (rxe_port_up, rxe_port_down). The event goes the way
// the engine's go: into the queue GetAsyncEvent reads, and the owner's
// link Wait is woken so an inline GetAsyncEvent sees it at once.
func (d *Device) portChanged(up bool) {
	ev := AsyncEvent{Type: EventPortActive, Port: 1}
	if !up {
		// Counted before the event is queued, so whoever takes the
		// event reads the count that goes with it.
		d.linkDowned.Add(1)
		ev.Type = EventPortErr
	}
	select {
	case d.events <- ev:
	default:
		d.eventsLost.Add(1)
	}
	if d.wake != nil {
		d.wake()
	}
}

// unwatchPort stops following the interface; Close calls it.
func (d *Device) unwatchPort() {
	if d.port != nil {
		d.port.Close()
	}
}
