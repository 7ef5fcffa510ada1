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
#include <veloz/proto/vlan.h>
#include <veloz/proto/ipv4.h>
#include <veloz/proto/ipv6.h>
#include <veloz/xsk_steer.h>

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
static __always_inline int ours6(const vz_ipv6hdr *ip,
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

/* The IPv4 address a frame is for: its destination, an ARP's target. */
static __always_inline int target4(const struct vz_ctx *ctx,
				   const struct vz_l2 *l2, __u32 *target)
{
	if (l2->proto == bpf_htons(ETH_P_IP)) {
		/* not checked further: udpd's stack counts what is malformed */
		vz_iphdr *ip = vz_ipv4_header(ctx, l2->l3_off);

		if (!ip)
			return -1;
		*target = ip->daddr;
		return 0;
	}
	if (l2->proto == bpf_htons(ETH_P_ARP)) {
		struct arp_eth_ip4 *arp =
			vz_header(ctx, l2->l3_off, sizeof(*arp));

		if (!arp)
			return -1;
		__builtin_memcpy(target, arp->tpa, 4);
		return 0;
	}
	return -1;
}

SEC("xdp")
int vz_xdp_udpd(struct xdp_md *xdp)
{
	struct vz_ctx ctx = { .xdp = xdp };
	__u32 key = 0, *ours = bpf_map_lookup_elem(&udpd_config, &key);
	struct in6_addr *us6;
	vz_ipv6hdr *ip6;
	struct vz_l2 l2;
	__u32 target;

	if (!ours || !*ours || vz_parse_l2(&ctx, &l2, 1, VZ_VLAN_8021Q))
		return XDP_PASS;
	if (l2.proto == bpf_htons(ETH_P_IPV6)) {
		ip6 = vz_ipv6_header(&ctx, l2.l3_off);
		us6 = bpf_map_lookup_elem(&udpd_config6, &key);
		if (!ip6 || !us6 || !ours6(ip6, us6))
			return XDP_PASS;
		return vz_xsk_redirect(xdp);
	}
	if (target4(&ctx, &l2, &target) || target != *ours)
		return XDP_PASS;
	return vz_xsk_redirect(xdp);
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
