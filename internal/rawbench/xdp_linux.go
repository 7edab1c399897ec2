package rawbench

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/linktest"
)

// Frame is a whole Ethernet/IPv4/UDP RoCE frame from va (address a) to vb
// (address b) carrying a packet linktest.Fill makes with size payload
// bytes, so the AF_XDP floor moves the same bytes as the links.
func Frame(va, vb netns.Veth, a, b netip.Addr, size int) ([]byte, error) {
	p := &link.Packet{Buf: make([]byte, link.Headroom+size+64), Off: link.Headroom}
	if err := linktest.Fill(p, 1, size, b); err != nil {
		return nil, err
	}
	const hl = bth.EthernetLen + bth.IPv4MinLen + bth.UDPLen
	f := p.Buf[p.Off-hl : p.Off+p.Len]
	bth.Ethernet(f).Encode(&bth.EthernetFields{Dst: [6]byte(vb.MAC), Src: [6]byte(va.MAC), EtherType: bth.EtherTypeIPv4})
	ip := f[bth.EthernetLen:]
	bth.IPv4(ip).Encode(&bth.IPv4Fields{TotalLength: uint16(len(ip)), Flags: bth.IPv4DontFragment, TTL: 64,
		Protocol: bth.ProtocolUDP, Src: a, Dst: b})
	bth.UDP(ip[bth.IPv4MinLen:]).Encode(&bth.UDPFields{SrcPort: 0xc000, DstPort: bth.RoCEPort,
		Length: uint16(len(ip) - bth.IPv4MinLen)})
	if err := bth.PutICRC(ip); err != nil {
		return nil, err
	}
	return f, nil
}

// openRaw opens a bare AF_XDP socket on v, busy-polled unless poller. A
// queue that the previous round's socket still holds is waited for by
// package xdp's bind.
func openRaw(v netns.Veth, poller bool) (*afxdp.Raw, error) {
	var r *afxdp.Raw
	err := v.NS.Do(func() (err error) {
		r, err = afxdp.OpenRaw(afxdp.RawConfig{Interface: v.Name, BusyPoll: !poller, Poller: poller})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("raw AF_XDP on %s: %w", v.Name, err)
	}
	return r, nil
}

// OpenXDPPair opens the floor's bare AF_XDP sockets on both ends, waiting
// as cfg.Poller says; closing them is the caller's.
func OpenXDPPair(cfg Config, va, vb netns.Veth) (ra, rb *afxdp.Raw, err error) {
	if ra, err = openRaw(va, cfg.Poller); err != nil {
		return nil, nil, err
	}
	if rb, err = openRaw(vb, cfg.Poller); err != nil {
		ra.Close()
		return nil, nil, err
	}
	return ra, rb, nil
}

// XDP measures the AF_XDP floor, the afxdp link's: bare AF_XDP sockets on
// both ends, the same XDP program, spinning on the rings (with busy-poll
// recvfrom) as the link spins in Wait, or with cfg.Poller asleep in the
// runtime's poller, and no per-packet work but moving descriptors. B
// echoes frames back unchanged for the ping-pong and counts them for the
// blast.
func XDP(cfg Config, va, vb netns.Veth, a, b netip.Addr, size int) (Result, error) {
	frame, err := Frame(va, vb, a, b, size)
	if err != nil {
		return Result{}, err
	}
	return XDPFrame(cfg, va, vb, frame)
}

// XDPFrame is XDP with a frame of the caller's, a whole Ethernet frame
// from va to vb (such as an RC floor message's, to blast frames the size
// of uroce's).
func XDPFrame(cfg Config, va, vb netns.Veth, frame []byte) (Result, error) {
	var r Result
	ra, rb, err := OpenXDPPair(cfg, va, vb)
	if err != nil {
		return r, err
	}
	defer ra.Close()
	defer rb.Close()
	if err := ra.SetFrame(frame); err != nil {
		return r, err
	}

	var wg sync.WaitGroup
	if cfg.Iters > 0 {
		var stop atomic.Bool
		wg.Go(func() { rb.Echo(&stop) })
		rtt := make([]time.Duration, cfg.Iters)
		err = cfg.warmUp(ra.PingPong)
		if err == nil {
			err = ra.PingPong(rtt)
		}
		stop.Store(true)
		wg.Wait()
		if err != nil {
			return r, fmt.Errorf("raw ping-pong: %w", err)
		}
		r.Min, r.P50, r.P99 = Percentiles(rtt)
	}
	if cfg.Blast <= 0 {
		return r, nil
	}

	// A warm-up, then the measured run; B's count is read only after its
	// goroutine has stopped.
	const settle = 10 * time.Millisecond
	run := func(d time.Duration) (sent, got uint64) {
		var stopTx, stopRx atomic.Bool
		before := rb.Received()
		wg.Go(func() { rb.Sink(&stopRx) })
		wg.Go(func() { sent, _ = ra.Blast(&stopTx) })
		time.Sleep(d)
		stopTx.Store(true)
		// Let frames in flight land before the sink stops.
		time.Sleep(settle)
		stopRx.Store(true)
		wg.Wait()
		return sent, rb.Received() - before
	}
	run(cfg.Blast / 5)
	start := time.Now()
	sent, n := run(cfg.Blast)
	el := time.Since(start) - settle
	r.PPS = float64(n) / el.Seconds()
	// UDP payload bits, as the UDP floor counts them.
	r.Gbps = r.PPS * float64(len(frame)-rcBTHOff) * 8 / 1e9
	r.Loss = Loss(sent, n)
	return r, nil
}
