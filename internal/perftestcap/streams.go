package perftestcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
)

// ServerPort is the TCP port perftest's server listens on (DEFAULT_PORT).
const ServerPort = 18515

// ErrNoExchange means a capture holds no perftest exchange in one of the
// two directions.
var ErrNoExchange = errors.New("no perftest exchange in capture")

// protocolTCP and tcpMinLen are TCP's IP protocol number and shortest
// header; bth has the views of the headers below it.
const (
	protocolTCP = 6
	tcpMinLen   = 20
)

// TCPStreams returns the bytes the client (ephemeral port) and the server
// (port 18515) sent over perftest's TCP connection in an Ethernet/IPv4
// capture, in order, with retransmitted segments left out.
func TCPStreams(file string) (client, server []byte, err error) {
	f, err := pcapfile.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	next := map[uint16]uint32{}
	for _, r := range f.Records {
		b := r.Data
		if len(b) < bth.EthernetLen+bth.IPv4MinLen || bth.Ethernet(b).EtherType() != bth.EtherTypeIPv4 {
			continue
		}
		ip := bth.IPv4(b[bth.EthernetLen:])
		ihl := ip.HeaderLen()
		end := int(ip.TotalLength())
		if ip.Protocol() != protocolTCP || end > len(ip) || ihl+tcpMinLen > end {
			continue
		}
		tcp := ip[ihl:end]
		off := int(tcp[12]>>4) * 4
		if off > len(tcp) {
			continue
		}
		pay := tcp[off:]
		src, seq := binary.BigEndian.Uint16(tcp), binary.BigEndian.Uint32(tcp[4:])
		if len(pay) == 0 {
			continue
		}
		if n, ok := next[src]; ok && seq != n {
			continue // retransmission
		}
		next[src] = seq + uint32(len(pay))
		if src == ServerPort {
			server = append(server, pay...)
		} else {
			client = append(client, pay...)
		}
	}
	if len(client) == 0 || len(server) == 0 {
		return nil, nil, fmt.Errorf("%s: %w", file, ErrNoExchange)
	}
	return client, server, nil
}

// Peer plays one side of a recorded exchange: reads return what that side
// sent, and writes are kept for comparison with what the other side sent.
type Peer struct {
	stream []byte
	off    int
	Wrote  []byte
}

// NewPeer returns a Peer that sends stream.
func NewPeer(stream []byte) *Peer { return &Peer{stream: stream} }

func (p *Peer) Read(b []byte) (int, error) {
	if p.off == len(p.stream) {
		return 0, io.EOF
	}
	n := copy(b, p.stream[p.off:])
	p.off += n
	return n, nil
}

func (p *Peer) Write(b []byte) (int, error) {
	p.Wrote = append(p.Wrote, b...)
	return len(b), nil
}

// Unread returns how many recorded bytes were never read.
func (p *Peer) Unread() int { return len(p.stream) - p.off }
