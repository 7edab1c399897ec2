package layers_test

import (
	"fmt"
	"io"
	"os"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/uroce/uroce/bth/layers"
)

// Decoding a capture with DecodingLayerParser: the layers are reused for
// every frame, and the ICRC is checked against the IP layer that carried
// the packet.
func ExampleRoCE_CheckICRC() {
	f, _ := os.Open("../../testdata/rxe-captures/ib_write_lat.pcap")
	defer f.Close()
	r, _ := pcapgo.NewReader(f)

	var (
		eth     gplayers.Ethernet
		ip4     gplayers.IPv4
		udp     gplayers.UDP
		roce    layers.RoCE
		payload gopacket.Payload
	)
	p := gopacket.NewDecodingLayerParser(gplayers.LayerTypeEthernet, &eth, &ip4, &udp, &roce, &payload)
	p.IgnoreUnsupported = true // ARP, IPv6 and TCP frames stop early
	decoded := make([]gopacket.LayerType, 0, 5)
	for n := 0; n < 2; {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if p.DecodeLayers(data, &decoded) != nil || len(decoded) < 4 || decoded[3] != layers.LayerTypeRoCE {
			continue
		}
		roce.CheckICRC(&ip4)
		fmt.Println(roce.BTH.Opcode, roce.BTH.DestQP, roce.BTH.PSN, len(roce.Payload), roce.ICRCStatus)
		n++
	}
	// Output:
	// RC_RDMA_WRITE_ONLY 17 11646317 64 ok
	// RC_ACKNOWLEDGE 17 11646317 0 ok
}
