package link

import (
	"net/netip"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/udp"
)

func init() {
	register(backend{"udp", func(v netns.Veth, a netip.Addr) (link.Link, error) {
		return udp.Open(udp.Config{Addr: a})
	}})
}
