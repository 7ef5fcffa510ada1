// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udpd's only kernel part: on the port udpd owns, frames for udpd's address
 * go to its AF_XDP socket; everything else stays with the kernel. udpd has
 * an IPv4 address of its own beside the kernel's on the same interface, so
 * the host keeps its SSH, its routing and its own ARP.
 *
 * For udpd: IPv4 to its address (any protocol: the stack counts what it
 * does not speak), and ARP whose target is its address (requests to answer,
 * replies to its own requests). One optional 802.1Q tag is looked through.
 * The address is set by udpd in udpd_config after loading; until then it
 * is 0 and nothing is taken.
 *
 * Its name starts with vz_xdp_, so a copy left by a killed udpd is
 * recognised as veloz's and replaced.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32); /* udpd's IPv4 address, network order */
	__uint(max_entries, 1);
} udpd_config SEC(".maps");

/* The fixed part of an Ethernet/IPv4 ARP packet, up to the target IP. */
struct arp_eth_ip4 {
	__be16 htype, ptype;
	__u8 hlen, plen;
	__be16 op;
	__u8 sha[6];
	__u8 spa[4];
	__u8 tha[6];
	__u8 tpa[4];
} __attribute__((packed));

SEC("xdp")
int vz_xdp_udpd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 key = 0, *ours = bpf_map_lookup_elem(&udpd_config, &key);
	void *l3 = eth + 1;
	__be16 proto;
	__u32 target;

	if (!ours || !*ours || l3 > end)
		return XDP_PASS;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (l3 + 4 > end)
			return XDP_PASS;
		proto = *(__be16 *)(l3 + 2);
		l3 += 4;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > end)
			return XDP_PASS;
		target = ip->daddr;
	} else if (proto == bpf_htons(ETH_P_ARP)) {
		struct arp_eth_ip4 *arp = l3;

		if ((void *)(arp + 1) > end)
			return XDP_PASS;
		__builtin_memcpy(&target, arp->tpa, 4);
	} else {
		return XDP_PASS;
	}
	if (target != *ours)
		return XDP_PASS;
	return (int)bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
