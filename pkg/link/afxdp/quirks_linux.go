package afxdp

import "fmt"

// driverQuirk is how a driver's AF_XDP support departs from what Open
// otherwise assumes of a NIC.
type driverQuirk struct {
	// txOwnNAPI: the driver transmits zero-copy frames from a NAPI
	// context of their own, not the receive queue's. virtio_net does
	// (virtnet_poll_tx runs virtnet_xsk_xmit). A socket with
	// SO_PREFER_BUSY_POLL makes the kernel skip the driver wakeup on
	// sendto and recvfrom (net/xdp/xsk.c, xsk_no_wakeup) and run only the
	// receive NAPI that busy polling knows, so frames wait on the TX ring
	// until something else schedules the transmit NAPI: for hundreds of
	// milliseconds on an idle guest. Such a driver gets no busy polling
	// when zero-copy may be bound.
	txOwnNAPI bool
	// xdpSpreadsRX: attaching an XDP program makes the device use more
	// queue pairs than the channel count shows. virtio_net asks the
	// device for the current pairs plus as many for XDP transmit
	// (virtnet_xdp_set) whenever the device has that many, and the device
	// then delivers received frames on all of them; a socket cannot bind
	// a queue past the channel count, so frames hashed there never arrive.
	xdpSpreadsRX bool
}

// quirks holds the drivers with quirks, by ETHTOOL_GDRVINFO name.
var quirks = map[string]driverQuirk{
	"virtio_net": {txOwnNAPI: true, xdpSpreadsRX: true},
}

// checkChannels refuses an interface whose driver would deliver frames on
// queues that no socket can bind: a quirky driver with fewer channels in
// use than it has.
func checkChannels(ifname, driver string, ch ethtoolChannels) error {
	if !quirks[driver].xdpSpreadsRX {
		return nil
	}
	inUse, most := ch.rxCount+ch.combinedCount, ch.maxRx+ch.maxCombined
	if ch.maxCombined > 0 {
		inUse, most = ch.combinedCount, ch.maxCombined
	}
	if inUse >= most {
		return nil
	}
	return fmt.Errorf("%s (%s) uses %d of its %d queue pairs, and with an XDP program attached it receives on all %d, where a socket can bind only %d; use them all with 'ethtool -L %s combined %d': %w",
		ifname, driver, inUse, most, most, inUse, ifname, most, ErrConfig)
}
