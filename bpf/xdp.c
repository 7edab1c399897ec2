//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// uroce_xdp steers RoCEv2 (UDP destination port 4791) into the AF_XDP socket
// of the receive queue the frame arrived on and passes everything else to the
// kernel stack, so ARP, ND, ICMP and TCP keep working on the interface.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCE_UDP_PORT 4791

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

// xsks maps an rx queue index to the AF_XDP socket bound to that queue. The
// loader may raise max_entries to the interface's queue count.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// Counters, per CPU: index 0 RoCE frames redirected, 1 RoCE frames passed
// because no socket was bound to their queue, 2 other frames passed.
enum { STAT_REDIRECT, STAT_NO_SOCKET, STAT_PASS, STAT_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline int count(__u32 idx, int verdict)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
	return verdict;
}

// The program is fragment-aware (SEC "xdp.frags", loaded with
// BPF_F_XDP_HAS_FRAGS): it only reads the headers, which drivers keep in the
// first buffer, so it is safe on multi-buffer frames, and veth accepts it on
// an interface whose peer MTU exceeds one page.
SEC("xdp.frags")
int uroce_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;
	struct udphdr *udp;

	if ((void *)(eth + 1) > end)
		return count(STAT_PASS, XDP_PASS);
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr *vh = l3;
		if ((void *)(vh + 1) > end)
			return count(STAT_PASS, XDP_PASS);
		proto = vh->proto;
		l3 = vh + 1;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		if ((void *)(ip + 1) > end)
			return count(STAT_PASS, XDP_PASS);
		if (ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
			return count(STAT_PASS, XDP_PASS);
		// A fragment (MF set or a nonzero offset) is left to the
		// kernel's reassembly; RoCEv2 senders set DF and never fragment.
		if (ip->frag_off & bpf_htons(0x3fff))
			return count(STAT_PASS, XDP_PASS);
		udp = (void *)ip + ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		if ((void *)(ip6 + 1) > end)
			return count(STAT_PASS, XDP_PASS);
		// Extension headers are not walked: RoCEv2 puts UDP right after
		// the fixed header, and anything else goes to the kernel.
		if (ip6->nexthdr != IPPROTO_UDP)
			return count(STAT_PASS, XDP_PASS);
		udp = (void *)(ip6 + 1);
	} else {
		return count(STAT_PASS, XDP_PASS);
	}
	if ((void *)(udp + 1) > end)
		return count(STAT_PASS, XDP_PASS);
	if (udp->dest != bpf_htons(ROCE_UDP_PORT))
		return count(STAT_PASS, XDP_PASS);

	// With XDP_PASS in the flags' low bits, bpf_redirect_map returns
	// XDP_PASS instead of XDP_ABORTED when no socket is bound to this
	// queue (kernel __bpf_xdp_redirect_map), so RoCE still reaches a kernel
	// UDP socket while no AF_XDP socket is listening.
	int verdict = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (verdict == XDP_REDIRECT)
		return count(STAT_REDIRECT, verdict);
	return count(STAT_NO_SOCKET, verdict);
}

char __license[] SEC("license") = "Dual BSD/GPL";
