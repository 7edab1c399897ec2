package afxdp

import (
	"bytes"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ethtoolDrvinfo is struct ethtool_drvinfo.
type ethtoolDrvinfo struct {
	cmd                                       uint32
	driver, version, fwVersion, busInfo, erom [32]byte
	reserved2                                 [12]byte
	nPrivFlags, nStats, testinfoLen           uint32
	eedumpLen, regdumpLen                     uint32
}

// ethtool makes one SIOCETHTOOL request whose command and answer are at
// data.
func ethtool(ifname string, data unsafe.Pointer) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = data
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	return nil
}

// channels returns the interface's channel counts (ETHTOOL_GCHANNELS).
func channels(ifname string) (ethtoolChannels, error) {
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	err := ethtool(ifname, unsafe.Pointer(&ch))
	return ch, err
}

// rxQueues returns how many receive queues the interface uses now
// (ETHTOOL_GCHANNELS: rx plus combined channels), or 0 if the driver does
// not say. IFLA_NUM_RX_QUEUES is no substitute: it is the allocated count,
// and binding an AF_XDP socket beyond real_num_rx_queues fails with EINVAL.
func rxQueues(ifname string) int {
	ch, err := channels(ifname)
	if err != nil {
		return 0
	}
	return int(ch.rxCount + ch.combinedCount)
}

// driverName returns the interface's driver (ETHTOOL_GDRVINFO), or "" if
// it does not say.
func driverName(ifname string) string {
	di := ethtoolDrvinfo{cmd: unix.ETHTOOL_GDRVINFO}
	if ethtool(ifname, unsafe.Pointer(&di)) != nil {
		return ""
	}
	n, _, _ := bytes.Cut(di.driver[:], []byte{0})
	return string(n)
}
