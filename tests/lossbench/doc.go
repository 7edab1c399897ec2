// Package lossbench measures how RC between two uroce peers recovers from
// random loss, go-back-N beside selective repeat (verbs.RetransSelective),
// in one run over the same links: a veth pair between two network
// namespaces, and a dumbbell whose router shapes the path with tc tbf.
// nftables rules drop a share of the RoCEv2 packets (UDP 4791) each way at
// random, `numgen random mod 100 < N`, and count what they dropped.
//
// For each link, drop rate and mode it runs a bulk phase, 64 KiB RDMA
// WRITEs kept 16 deep for a few seconds, and a latency phase, a 64-byte
// SEND ping-pong, each on fresh QPs, and prints one markdown table per
// link: goodput and its share of the same mode's clean run, the packets
// dropped against those the requester retransmitted, its timeouts, and
// the ping-pong's round-trip percentiles.
//
// It is a benchmark: it asserts only that every WR completes and every
// byte lands, and runs only when asked, as root (docs/loss.md):
//
//	UROCE_LOSSBENCH=1 go test -count=1 -run TestLossBench -v ./tests/lossbench
package lossbench
