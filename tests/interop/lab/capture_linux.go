package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/internal/pcapfile"
	"golang.org/x/sys/unix"
)

// Capture records every frame seen on one interface of a namespace with
// an AF_PACKET socket, the way tcpdump would, into memory and, on Stop, a
// pcap file.
type Capture struct {
	// Path is the pcap file Stop writes.
	Path string

	fd      int
	stop    atomic.Bool
	done    chan struct{}
	once    sync.Once
	records []pcapfile.Record
	loopErr error
	result  error
}

// captureSnap is the longest frame kept whole: jumbo frames (MTU 9000)
// plus headers fit.
const captureSnap = 16384

// StartCapture opens a capture on ifname in ns. On a bridge it puts the
// bridge in promiscuous mode, which is what makes Linux hand the bridge
// device every frame it forwards between ports, not only its own.
func StartCapture(ns *netns.NS, ifname, path string) (*Capture, error) {
	c := &Capture{Path: path, fd: -1, done: make(chan struct{})}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		// Protocol 0 until bound: a socket made with ETH_P_ALL would
		// see every interface's frames until bind narrows it.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		c.fd = fd
		// TCG guests are slow, but a burst of 64 KiB messages still
		// comes faster than a reader woken per frame: make room.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("SO_RCVTIMEO: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			return fmt.Errorf("bind to %s: %w", ifname, err)
		}
		// The kernel takes an 802.1Q tag off a frame before a packet
		// socket sees it and says so in the auxiliary data; the loop
		// puts it back, as libpcap does.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return fmt.Errorf("PACKET_AUXDATA: %w", err)
		}
		mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("promiscuous %s: %w", ifname, err)
		}
		return nil
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		return nil, fmt.Errorf("lab: capture on %s in %s: %w", ifname, ns.Name, err)
	}
	go c.loop()
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *Capture) loop() {
	defer close(c.done)
	buf := make([]byte, captureSnap)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{}))))
	for {
		flags := 0
		if c.stop.Load() {
			flags = unix.MSG_DONTWAIT // drain what is queued, then stop
		}
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, flags|unix.MSG_TRUNC)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				if flags != 0 {
					return
				}
				continue
			}
			c.loopErr = fmt.Errorf("recvfrom: %w", err)
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // sent by the bridge itself (IPv6 chatter), not forwarded
		}
		kept := min(n, len(buf))
		data := append([]byte(nil), buf[:kept]...)
		if tag, ok := vlanTag(oob[:oobn]); ok && kept >= 12 {
			data = append(data[:12], append(tag[:], data[12:]...)...)
			n += len(tag)
		}
		c.records = append(c.records, pcapfile.Record{Time: time.Now(), Data: data, OrigLen: n})
	}
}

// vlanTag returns the 802.1Q tag (TPID and TCI) the kernel took off a
// frame, from the frame's auxiliary data.
func vlanTag(oob []byte) (tag [4]byte, ok bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return tag, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA ||
			len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
			continue
		}
		aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
		if aux.Status&unix.TP_STATUS_VLAN_VALID == 0 {
			return tag, false
		}
		tpid := uint16(0x8100)
		if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			tpid = aux.Vlan_tpid
		}
		binary.BigEndian.PutUint16(tag[0:], tpid)
		binary.BigEndian.PutUint16(tag[2:], aux.Vlan_tci)
		return tag, true
	}
	return tag, false
}

// Stop ends the capture, writes Path and returns the frames. The error
// reports frames the kernel dropped for want of buffer, a failed read or
// a failed write; the frames are returned either way.
func (c *Capture) Stop() ([]pcapfile.Record, error) {
	c.once.Do(func() {
		c.stop.Store(true)
		<-c.done
		errs := []error{c.loopErr}
		if st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err != nil {
			errs = append(errs, fmt.Errorf("PACKET_STATISTICS: %w", err))
		} else if st.Drops > 0 {
			errs = append(errs, fmt.Errorf("the kernel dropped %d frames the capture did not read", st.Drops))
		}
		unix.Close(c.fd)
		errs = append(errs, c.write())
		if err := errors.Join(errs...); err != nil {
			c.result = fmt.Errorf("lab: capture %s: %w", filepath.Base(c.Path), err)
		}
	})
	return c.records, c.result
}

func (c *Capture) write() error {
	f, err := os.Create(c.Path)
	if err != nil {
		return err
	}
	w, err := pcapfile.NewWriter(f, pcapfile.LinkTypeEthernet, captureSnap)
	for _, r := range c.records {
		if err != nil {
			break
		}
		err = w.Write(r.Time, r.Data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Capture starts a capture on the lab's bridge, written to name.pcap in
// the lab's directory, and stops it at cleanup if the test does not.
func (l *Lab) Capture(name string) *Capture {
	l.t.Helper()
	c, err := StartCapture(l.NS, l.Bridge, filepath.Join(l.dir, name+".pcap"))
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Stop() })
	return c
}
