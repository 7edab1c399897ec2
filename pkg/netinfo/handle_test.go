package netinfo

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestHandleRouteOnly: the handle asks the kernel for rtnetlink alone, so
// a kernel without XFRM or netfilter netlink does not fail it.
func TestHandleRouteOnly(t *testing.T) {
	nl, err := handle(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if !nl.SupportsNetlinkFamily(unix.NETLINK_ROUTE) {
		t.Error("no rtnetlink socket")
	}
	for _, f := range []int{unix.NETLINK_XFRM, unix.NETLINK_NETFILTER} {
		if nl.SupportsNetlinkFamily(f) {
			t.Errorf("the handle opened netlink family %d", f)
		}
	}
}
