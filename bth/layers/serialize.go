package layers

import (
	"fmt"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/uroce/uroce/bth"
)

// SerializeLayers clears b and serializes ls into it as
// gopacket.SerializeLayers does, then computes the ICRC of the RoCE packet
// and writes it in place. The first layer must be Ethernet, IPv4 or IPv6,
// so that the IP datagram can be found; the ICRC is always computed,
// whatever opts.ComputeChecksums says, because RoCE receivers drop a packet
// without it. Errors from finding the datagram are bth's, wrapped.
func SerializeLayers(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions, ls ...gopacket.SerializableLayer) error {
	if err := gopacket.SerializeLayers(b, opts, ls...); err != nil {
		return err
	}
	if len(ls) == 0 {
		return fmt.Errorf("roce: serialize: %w: no layers", bth.ErrNotRoCE)
	}
	var f bth.Frame
	var err error
	switch t := ls[0].LayerType(); t {
	case gplayers.LayerTypeEthernet:
		err = f.Decode(b.Bytes())
	case gplayers.LayerTypeIPv4, gplayers.LayerTypeIPv6:
		err = f.DecodeIP(b.Bytes())
	default:
		return fmt.Errorf("roce: serialize: %w: first layer %v", bth.ErrNotRoCE, t)
	}
	if err != nil {
		return fmt.Errorf("roce: serialize: %w", err)
	}
	return bth.PutICRC(f.Datagram())
}
