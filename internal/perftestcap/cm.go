package perftestcap

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// CMExchange is a perftest -R run in a capture: the rdma_cm MADs of its
// two connections and its out-of-band exchange, carried as RC SENDs over
// the first connection instead of TCP.
type CMExchange struct {
	// Client sent the first REQ; Server answered it.
	Client, Server netip.Addr
	// ClientSends and ServerSends are the payloads of the RC SEND Only
	// packets each side sent on the first connection's QP, in order.
	ClientSends, ServerSends [][]byte
	// MADs are the CM MADs to and from QP1, in capture order.
	MADs []CMMAD
}

// CMMAD is one captured CM MAD and who sent it.
type CMMAD struct {
	FromClient bool
	MAD        mad.MAD
}

// CMStreams returns the rdma_cm exchange of a perftest -R capture.
func CMStreams(file string) (*CMExchange, error) {
	f, err := pcapfile.ReadFile(file)
	if err != nil {
		return nil, err
	}
	x := &CMExchange{}
	var cliQPN, srvQPN uint32
	var sawREQ, sawREP bool
	for i, r := range f.Records {
		var fr bth.Frame
		if err := fr.Decode(r.Data); err != nil {
			if errors.Is(err, bth.ErrNotRoCE) {
				continue
			}
			return nil, fmt.Errorf("%s #%d: %w", file, i, err)
		}
		ip := fr.IPv4()
		switch {
		case fr.Opcode() == bth.UDSendOnly && fr.BTH().DestQP() == mad.GSIQPN:
			m, err := mad.DecodeCM(append([]byte(nil), fr.Payload()...))
			if err != nil {
				return nil, fmt.Errorf("%s #%d: %w", file, i, err)
			}
			attr := m.Header().AttrID()
			if attr == mad.AttrREQ && !sawREQ {
				sawREQ, x.Client, x.Server, cliQPN = true, ip.Src(), ip.Dst(), m.REQ().LocalQPN()
			}
			if attr == mad.AttrREP && !sawREP {
				sawREP, srvQPN = true, m.REP().LocalQPN()
			}
			x.MADs = append(x.MADs, CMMAD{FromClient: ip.Src() == x.Client, MAD: m})
		case fr.Opcode() == bth.RCSendOnly && sawREP:
			p := append([]byte(nil), fr.Payload()...)
			switch {
			case ip.Src() == x.Client && fr.BTH().DestQP() == srvQPN:
				x.ClientSends = append(x.ClientSends, p)
			case ip.Src() == x.Server && fr.BTH().DestQP() == cliQPN:
				x.ServerSends = append(x.ServerSends, p)
			}
		}
	}
	if len(x.ClientSends) == 0 || len(x.ServerSends) == 0 {
		return nil, fmt.Errorf("%s: %w", file, ErrNoExchange)
	}
	return x, nil
}
