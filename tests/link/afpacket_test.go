package link

import (
	"net/netip"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afpacket"
)

func init() {
	register(backend{"afpacket", func(v netns.Veth, a netip.Addr) (link.Link, error) {
		return afpacket.Open(afpacket.Config{Ifname: v.Name, Addr: a})
	}})
}
