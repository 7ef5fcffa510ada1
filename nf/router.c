/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nf/router.c: IPv4 and IPv6 forwarding by longest-prefix match, the XDP
 * paper's router. A route leads to a next hop (egress port, neighbour MAC);
 * the frame leaves with its TTL or hop limit decremented (the IPv4 header
 * checksum updated incrementally, RFC 1624) and its MACs rewritten.
 *
 * Whatever needs more than a table lookup goes to the kernel (PASS), which
 * then does what a router must: traffic for this host, an expired TTL (ICMP
 * time exceeded), no route (ICMP unreachable), a next hop whose MAC is not
 * known yet (ARP or NDP), multicast and link-local, anything but IP.
 *
 * With fib=1 the kernel's own FIB answers instead of our tables, through
 * bpf_fib_lookup(), as in the paper; that needs the xdp backends.
 */
#include <veloz/nf.h>

VZ_CONFIG(struct vz_router_config) = { .fib = 0,
				       .table = VZ_ROUTER_TABLE_DIR24 };

VZ_CONFIG_CHECK(struct vz_router_config, cfg)
{
	if (cfg->fib > 1)
		return "fib must be 0 (veloz's tables) or 1 (the kernel's FIB)";
	if (cfg->table > VZ_ROUTER_TABLE_DIR24)
		return "table must be \"trie\" (0) or \"dir24\" (1)";
	return 0;
}

VZ_LPM(router_routes4, struct vz_lpm4_key, struct vz_route, VZ_ROUTER_ROUTES4);
VZ_LPM(router_routes6, struct vz_lpm6_key, struct vz_route, VZ_ROUTER_ROUTES6);
VZ_ARRAY(router_nexthops, struct vz_nexthop, VZ_ROUTER_NEXTHOPS);
VZ_ARRAY(router_tbl24, __u32, VZ_ROUTER_TBL24);
VZ_ARRAY(router_tbl8, __u32, VZ_ROUTER_TBL8_GROUPS * 256);
VZ_ARRAY(router_tbl8_owner, __u32, VZ_ROUTER_TBL8_GROUPS);
VZ_PERCPU_ARRAY(router_counters, __u64, VZ_ROUTER_COUNTERS);
VZ_BTF_EXPORT(enum vz_router_counter, router_counter);
VZ_BTF_EXPORT(enum vz_route_kind, route_kind);
VZ_BTF_EXPORT(enum vz_router_table, router_table);

VZ_INLINE int count(int verdict, __u32 counter)
{
	__u64 *n = vz_map_lookup(&router_counters, &counter);

	if (n)
		*n += 1;
	return verdict;
}

/* Rewrite the MACs and send the frame out of the next hop's port. */
VZ_INLINE int forward(struct vz_ctx *ctx, struct ethhdr *eth, const __u8 *smac,
		      const __u8 *dmac, __u32 port)
{
	__builtin_memcpy(eth->h_source, smac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, dmac, ETH_ALEN);
	count(0, VZ_ROUTER_FORWARDED);
	return VZ_REDIRECT(port);
}

/* What a route says; *nh is set for VZ_ROUTE_FORWARD with a known MAC. */
VZ_INLINE int route_verdict(const struct vz_route *route,
			    struct vz_nexthop **nh)
{
	__u32 index;

	if (!route)
		return count(VZ_PASS, VZ_ROUTER_NO_ROUTE);
	switch (route->kind) {
	case VZ_ROUTE_FORWARD:
		break;
	case VZ_ROUTE_LOCAL:
		return count(VZ_PASS, VZ_ROUTER_LOCAL);
	case VZ_ROUTE_BLACKHOLE:
		return count(VZ_DROP, VZ_ROUTER_BLACKHOLE);
	default:
		return count(VZ_PASS, VZ_ROUTER_TO_KERNEL);
	}
	index = route->nexthop;
	*nh = vz_map_lookup(&router_nexthops, &index);
	if (!*nh || !((*nh)->flags & VZ_NEXTHOP_RESOLVED))
		return count(VZ_PASS, VZ_ROUTER_UNRESOLVED);
	return VZ_REDIRECT_VERDICT; /* go on: forward */
}

/*
 * The DIR-24-8 lookup: one array load for prefixes up to /24, two for
 * longer ones. Array lookups are inlined by the verifier, so this costs two
 * memory accesses where the trie walks up to 32 nodes.
 */
VZ_INLINE const struct vz_route *dir24_lookup(const __u8 *daddr,
					      struct vz_route *route)
{
	__u32 addr = (__u32)daddr[0] << 24 | (__u32)daddr[1] << 16 |
		     (__u32)daddr[2] << 8 | daddr[3];
	__u32 index = addr >> 8, entry;
	__u32 *e = vz_map_lookup(&router_tbl24, &index);

	if (!e)
		return 0;
	entry = *e;
	if (entry & VZ_DIR24_GROUP) {
		index = (entry & VZ_DIR24_INDEX_MASK) << 8 | (addr & 0xff);
		e = vz_map_lookup(&router_tbl8, &index);
		if (!e)
			return 0;
		entry = *e;
	}
	if (!(entry & VZ_DIR24_ROUTE))
		return 0;
	route->kind = entry >> VZ_DIR24_KIND_SHIFT & 3;
	route->nexthop = entry & VZ_DIR24_NEXTHOP_MASK;
	return route;
}

VZ_INLINE int route_ipv4(struct vz_ctx *ctx, struct ethhdr *eth)
{
	vz_iphdr *iph = vz_ipv4(ctx, ETH_HLEN);
	struct vz_nexthop *nh = 0;
	struct vz_fib fib;
	__u16 old_word, new_word;
	__u8 first_octet;
	int verdict;

	/*
	 * The total length is not held against the frame: forwarding
	 * rewrites only TTL and MACs and passes the rest on as it came.
	 */
	if (!iph || !vz_ipv4_len_ok(iph, 0xffff))
		return count(VZ_DROP, VZ_ROUTER_MALFORMED);
	first_octet = ((__u8 *)&iph->daddr)[0];
	/* multicast, limited broadcast: not for forwarding */
	if (first_octet >= 224)
		return count(VZ_PASS, VZ_ROUTER_TO_KERNEL);
	if (vz_config.fib) {
		if (vz_fib_lookup(ctx, 0, &iph->saddr, &iph->daddr, &fib))
			return count(VZ_PASS, VZ_ROUTER_NO_ROUTE);
	} else {
		struct vz_route found;
		const struct vz_route *route;

		if (vz_config.table == VZ_ROUTER_TABLE_DIR24) {
			route = dir24_lookup((const __u8 *)&iph->daddr, &found);
		} else {
			route = vz_lpm_lookup4(&router_routes4, &iph->daddr);
		}
		verdict = route_verdict(route, &nh);
		if (verdict != VZ_REDIRECT_VERDICT || !nh)
			return verdict;
	}
	if (iph->ttl <= 1)
		return count(VZ_PASS, VZ_ROUTER_TTL_EXPIRED);
	/* TTL shares a 16-bit word with the protocol */
	old_word = *(__u16 *)&iph->ttl;
	iph->ttl--;
	new_word = *(__u16 *)&iph->ttl;
	vz_csum_replace2(&iph->check, old_word, new_word);
	if (!nh)
		return forward(ctx, eth, fib.smac, fib.dmac, fib.port);
	return forward(ctx, eth, nh->smac, nh->dmac, nh->port);
}

VZ_INLINE int route_ipv6(struct vz_ctx *ctx, struct ethhdr *eth)
{
	vz_ipv6hdr *ip6h = vz_ipv6(ctx, ETH_HLEN);
	struct vz_lpm6_key key = { .prefixlen = 128 };
	struct vz_nexthop *nh = 0;
	struct vz_fib fib;
	__u8 *dst;
	int verdict;

	if (!ip6h)
		return count(VZ_DROP, VZ_ROUTER_MALFORMED);
	dst = ip6h->daddr.s6_addr;
	/* multicast (NDP among it) and link-local stay on the link */
	if (dst[0] == 0xff || (dst[0] == 0xfe && (dst[1] & 0xc0) == 0x80))
		return count(VZ_PASS, VZ_ROUTER_TO_KERNEL);
	if (vz_config.fib) {
		if (vz_fib_lookup(ctx, 1, ip6h->saddr.s6_addr, dst, &fib))
			return count(VZ_PASS, VZ_ROUTER_NO_ROUTE);
	} else {
		__builtin_memcpy(key.addr, dst, 16);
		verdict = route_verdict(vz_map_lookup(&router_routes6, &key),
					&nh);
		if (verdict != VZ_REDIRECT_VERDICT || !nh)
			return verdict;
	}
	if (ip6h->hop_limit <= 1)
		return count(VZ_PASS, VZ_ROUTER_TTL_EXPIRED);
	ip6h->hop_limit--;
	if (!nh)
		return forward(ctx, eth, fib.smac, fib.dmac, fib.port);
	return forward(ctx, eth, nh->smac, nh->dmac, nh->port);
}

VZ_NF(router)
{
	struct ethhdr *eth = vz_eth(ctx);

	if (!eth)
		return count(VZ_DROP, VZ_ROUTER_MALFORMED);
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return route_ipv4(ctx, eth);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return route_ipv6(ctx, eth);
	return count(VZ_PASS, VZ_ROUTER_TO_KERNEL);
}
