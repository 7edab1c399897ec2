package link

import (
	"net/netip"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

func init() {
	register(backend{"afxdp", func(v netns.Veth, a netip.Addr) (link.Link, error) {
		return afxdp.Open(afxdp.Config{Interface: v.Name, Addr: a})
	}})
}
