package cc

// Counter names as ConnectX reports them (ethtool -S, the verbs hw counters
// and mlx5's sysfs), so that dashboards users already have keep working.
const (
	NameNPECNMarkedRoCEPackets = "np_ecn_marked_roce_packets"
	NameNPCNPSent              = "np_cnp_sent"
	NameRPCNPHandled           = "rp_cnp_handled"
	NameRPCNPIgnored           = "rp_cnp_ignored"
)

// Counters are the congestion control events of one QP, or of a device when
// summed with Add.
type Counters struct {
	// NPECNMarkedRoCEPackets counts received packets that carried CE.
	NPECNMarkedRoCEPackets uint64
	// NPCNPSent counts CNPs the notification point asked to send.
	NPCNPSent uint64
	// RPCNPHandled counts CNPs the reaction point acted on (DCQCN).
	RPCNPHandled uint64
	// RPCNPIgnored counts CNPs received by a QP whose algorithm has no
	// reaction point (TIMELY, Swift, None): as on ConnectX, a rising count
	// means the peer marks ECN but this side does not react to it.
	RPCNPIgnored uint64
}

// Add adds o to c, for device totals.
func (c *Counters) Add(o Counters) {
	c.NPECNMarkedRoCEPackets += o.NPECNMarkedRoCEPackets
	c.NPCNPSent += o.NPCNPSent
	c.RPCNPHandled += o.RPCNPHandled
	c.RPCNPIgnored += o.RPCNPIgnored
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

// Named returns the counters with their ConnectX names, in a fixed order,
// without allocating: for the verbs counters API and a Prometheus collector.
func (c *Counters) Named() [4]Counter {
	return [4]Counter{
		{NameNPECNMarkedRoCEPackets, c.NPECNMarkedRoCEPackets},
		{NameNPCNPSent, c.NPCNPSent},
		{NameRPCNPHandled, c.RPCNPHandled},
		{NameRPCNPIgnored, c.RPCNPIgnored},
	}
}

// Stats is a snapshot of one QP's congestion control.
type Stats struct {
	Counters
	Kind Kind
	// Rate is the current sending rate (DCQCN's Rc).
	Rate Rate
	// TargetRate is DCQCN's Rt; for other algorithms it equals Rate.
	TargetRate Rate
	// Window is the congestion window in bytes, 0 when there is none.
	Window int
	// Alpha is DCQCN's α in 10-bit fixed point (1023 is 1.0), as the
	// firmware keeps it; 0 for other algorithms.
	Alpha uint32
}
