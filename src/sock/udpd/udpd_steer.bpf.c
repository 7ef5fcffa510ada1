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
 * is 0 and nothing is taken. With an IPv6 address (udpd_config6, set the
 * same way; all zero: none): IPv6 to it, and to its solicited-node group,
 * where neighbour solicitations for it arrive. Not the link-local address:
 * udpd shares the interface's MAC, so that one is the kernel's.
 *
 * Its name starts with vz_xdp_, so a copy left by a killed udpd is
 * recognised as veloz's and replaced.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct in6_addr); /* udpd's IPv6 address */
	__uint(max_entries, 1);
} udpd_config6 SEC(".maps");

/* IPv6 to our address, or to its solicited-node group ff02::1:ffXX:XXXX. */
static __always_inline int ours6(const struct ipv6hdr *ip,
				 const struct in6_addr *us)
{
	const __u32 *d = ip->daddr.in6_u.u6_addr32;
	const __u32 *u = us->in6_u.u6_addr32;

	if (!(u[0] | u[1] | u[2] | u[3]))
		return 0;
	if (d[0] == u[0] && d[1] == u[1] && d[2] == u[2] && d[3] == u[3])
		return 1;
	return d[0] == bpf_htonl(0xff020000) && !d[1] && d[2] == bpf_htonl(1) &&
	       d[3] == (bpf_htonl(0xff000000) | (u[3] & bpf_htonl(0xffffff)));
}

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
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		struct in6_addr *us6 = bpf_map_lookup_elem(&udpd_config6, &key);

		if ((void *)(ip6 + 1) > end || !us6 || !ours6(ip6, us6))
			return XDP_PASS;
		return (int)bpf_redirect_map(&xsks_map, ctx->rx_queue_index,
					     XDP_PASS);
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
