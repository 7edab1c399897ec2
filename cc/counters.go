package cc

// Counter names as ConnectX reports them (ethtool -S, the verbs hw counters
// and mlx5's sysfs), so that dashboards users already have keep working.
const (
	NameNPECNMarkedRoCEPackets = "np_ecn_marked_roce_packets"
	NameNPCNPSent              = "np_cnp_sent"
	NameRPCNPHandled           = "rp_cnp_handled"
	NameRPCNPIgnored           = "rp_cnp_ignored"
)

// HPCC's counters have no ConnectX equivalent; their names follow the
// same style.
const (
	NameHPCCINTAcks        = "hpcc_int_acks"
	NameHPCCAcksWithoutINT = "hpcc_acks_without_int"
	NameHPCCWindowUpdates  = "hpcc_window_updates"
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
	// HPCCINTAcks counts ACKs that brought HPCC a path's telemetry.
	HPCCINTAcks uint64
	// HPCCAcksWithoutINT counts ACKs HPCC got with no telemetry, which
	// it cannot act on: a rising count means the path stamps no INT.
	HPCCAcksWithoutINT uint64
	// HPCCWindowUpdates counts updates of HPCC's reference window Wc,
	// about one per RTT (Algorithm 1's updateWc).
	HPCCWindowUpdates uint64
}

// CounterDesc describes one field of Counters: its name, its ConnectX
// name and what it counts. CounterTable is the one list of the counters:
// Add, Named and the metrics exporter all read it, so a counter is added
// by its field and its row (TestCounterTable fails on a field without a
// row).
type CounterDesc struct {
	// Field is the name of the Go field.
	Field string
	// Name is the counter's ConnectX name.
	Name string
	// Help says what it counts, for an exporter.
	Help string
	// Ptr returns the counter in c.
	Ptr func(c *Counters) *uint64
}

// CounterTable describes every field of Counters, in their order. It is
// not to be modified.
var CounterTable = [...]CounterDesc{
	{"NPECNMarkedRoCEPackets", NameNPECNMarkedRoCEPackets, "CE-marked RoCE packets received (mlx5 np_ecn_marked_roce_packets).",
		func(c *Counters) *uint64 { return &c.NPECNMarkedRoCEPackets }},
	{"NPCNPSent", NameNPCNPSent, "CNPs sent in answer to CE marks (mlx5 np_cnp_sent).",
		func(c *Counters) *uint64 { return &c.NPCNPSent }},
	{"RPCNPHandled", NameRPCNPHandled, "CNPs the reaction point acted on (mlx5 rp_cnp_handled).",
		func(c *Counters) *uint64 { return &c.RPCNPHandled }},
	{"RPCNPIgnored", NameRPCNPIgnored, "CNPs received by QPs whose algorithm does not react to them (mlx5 rp_cnp_ignored).",
		func(c *Counters) *uint64 { return &c.RPCNPIgnored }},
	{"HPCCINTAcks", NameHPCCINTAcks, "ACKs that carried in-band telemetry to HPCC.",
		func(c *Counters) *uint64 { return &c.HPCCINTAcks }},
	{"HPCCAcksWithoutINT", NameHPCCAcksWithoutINT, "ACKs HPCC received without in-band telemetry and could not act on.",
		func(c *Counters) *uint64 { return &c.HPCCAcksWithoutINT }},
	{"HPCCWindowUpdates", NameHPCCWindowUpdates, "Updates of HPCC's reference window, about one per RTT.",
		func(c *Counters) *uint64 { return &c.HPCCWindowUpdates }},
}

// Add adds o to c, for device totals.
func (c *Counters) Add(o Counters) {
	for _, d := range CounterTable {
		*d.Ptr(c) += *d.Ptr(&o)
	}
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

// Named returns the counters with their ConnectX names, in CounterTable's
// order, without allocating.
func (c *Counters) Named() [len(CounterTable)]Counter {
	var n [len(CounterTable)]Counter
	for i, d := range CounterTable {
		n[i] = Counter{d.Name, *d.Ptr(c)}
	}
	return n
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
