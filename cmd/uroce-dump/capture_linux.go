package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"
)

// liveSource captures every frame of one interface through an AF_PACKET
// raw socket. Reads time out every pollInterval so that the loop notices
// the context ending (Ctrl-C) and returns io.EOF, which lets the dumper
// print its summary and close its -w file cleanly.
type liveSource struct {
	ctx context.Context
	fd  int
	buf []byte
}

const pollInterval = 200 * time.Millisecond

// snapLen is the capture buffer: big enough for the GSO/GRO super-frames
// AF_PACKET shows on loopback and veth.
const snapLen = 256 << 10

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openLive(ctx context.Context, name string) (*liveSource, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("capture: packet socket (root needed): %w", err)
	}
	s := &liveSource{ctx: ctx, fd: fd, buf: make([]byte, snapLen)}
	if err := s.setup(ifi); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("capture on %s: %w", name, err)
	}
	return s, nil
}

func (s *liveSource) setup(ifi *net.Interface) error {
	if err := unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(pollInterval.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	if ifi.Flags&net.FlagLoopback != 0 {
		// Loopback shows every frame twice, outgoing and incoming;
		// keep one, as libpcap does. Kernels before 4.20 lack the
		// option and show both.
		_ = unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	}
	return nil
}

// ZeroCopyReadPacketData returns the next frame, valid until the next
// call, or io.EOF once the context is done.
func (s *liveSource) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	for {
		if s.ctx.Err() != nil {
			return nil, gopacket.CaptureInfo{}, io.EOF
		}
		n, err := unix.Read(s.fd, s.buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, gopacket.CaptureInfo{}, fmt.Errorf("capture: %w", err)
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: n, Length: n}
		return s.buf[:n], ci, nil
	}
}

func (s *liveSource) LinkType() layers.LinkType { return layers.LinkTypeEthernet }

func (s *liveSource) Close() error { return unix.Close(s.fd) }
