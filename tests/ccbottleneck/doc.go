// Package ccbottleneck tests uroce's congestion control on a real ECN
// bottleneck: a dumbbell of network namespaces in which several senders,
// each a uroce device, stream RDMA WRITEs through a router to one receiver.
// The test runs twice, with the hosts on the kernel UDP backend and on
// AF_XDP (package afxdp, its XDP program on each host's veth end passing
// ARP and the rest to the kernel); the router forwards in the kernel
// either way.
//
// The router's egress toward the receiver is the bottleneck: a tc tbf
// shaper with a queue of a few hundred kilobytes. This kernel has no RED or
// other AQM qdisc, so the router marks CE with nftables instead, on the
// forward hook, on ECN-capable RoCE packets that arrive above a rate meter a
// little under the shaper's rate: a phantom queue, as in HULL (Alizadeh et
// al., NSDI 2012), which signals congestion before the real queue builds.
//
// One run measures the same flows twice, with congestion control off and
// with DCQCN, and compares them: goodput against the bottleneck, Jain's
// fairness across flows, the shaper's queue (sampled over netlink) and
// its drops, and the senders' retransmissions; every byte written is
// checked. The table also shows the flows' summed pacing rate, so that a
// run where the senders could not send what congestion control allowed
// (a starved machine) is told apart from one where it throttled them.
// The assertions are ratios and counts measured in the same run, never
// wall-clock limits. The test needs root and removes everything it made.
package ccbottleneck
