package verbs

// The default link backend, link.Default (udp), comes with this package,
// so OpenAddr and OpenInterface, and link.Open(link.Default, ...), need no
// other import. The other backends register when their package is
// imported (see link.Register).
import _ "github.com/uroce/uroce/pkg/link/udp"
