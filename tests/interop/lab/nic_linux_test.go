package lab

import (
	"net"
	"testing"
)

// TestNICArgs: the QEMU arguments of a guest's NIC, one tap queue per
// virtio-net queue pair.
func TestNICArgs(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
	for _, c := range []struct {
		cfg         GuestConfig
		taps        int
		netdev, nic string
	}{
		{GuestConfig{MAC: mac}, 1, "tap,id=n0,fd=3", "virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:77:00:0b"},
		{GuestConfig{MAC: mac, ZeroCopyNIC: true}, zeroCopyQueues, "tap,id=n0,fds=3:4",
			"virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:77:00:0b,disable-legacy=on,iommu_platform=on,mq=on,vectors=6"},
	} {
		if got := tapNetdev(c.taps); got != c.netdev {
			t.Errorf("tapNetdev(%d) = %q, want %q", c.taps, got, c.netdev)
		}
		if got := virtioNet(c.cfg); got != c.nic {
			t.Errorf("virtioNet(%+v) = %q, want %q", c.cfg, got, c.nic)
		}
	}
}
