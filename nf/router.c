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
 * A multipath route leads to a next-hop group (router_groups, at the slot
 * its router_nexthops entry flags VZ_NEXTHOP_GROUP): the frame's flow hash,
 * nf/lb.c's (5-tuple for unfragmented TCP and UDP, else addresses and
 * protocol), picks the member, so a flow keeps one next hop while the group
 * does. A member without a MAC passes as a lone unresolved next hop does.
 *
 * With fib=1 the kernel's own FIB answers instead of our tables, through
 * bpf_fib_lookup(), as in the paper; that needs the xdp backends.
 */
#include <veloz/nf.h>
#include <veloz/jhash.h>

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
VZ_ARRAY(router_groups, struct vz_nexthop_group, VZ_ROUTER_NEXTHOPS);
_Static_assert((VZ_ROUTER_GROUP_BUCKETS & (VZ_ROUTER_GROUP_BUCKETS - 1)) == 0,
	       "group_member() masks a bucket");
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

/* The words nf/lb.c's flow hash covers: a flow's addresses, protocol, ports. */
union flow {
	struct vz_lb_flow flow;
	__u32 words[VZ_LB_FLOW_WORDS];
};

/* The ports of TCP and UDP at off, if the frame holds them; else none. */
VZ_INLINE void flow_ports(struct vz_ctx *ctx, __u32 off, union flow *f)
{
	struct vz_l4_ports *ports;

	if (f->flow.proto != IPPROTO_TCP && f->flow.proto != IPPROTO_UDP)
		return;
	ports = vz_l4_ports(ctx, off);
	if (!ports)
		return;
	f->flow.sport = ports->source;
	f->flow.dport = ports->dest;
}

/* A fragment has no ports, or only its first one: all take one path. */
VZ_INLINE __u32 flow_hash4(struct vz_ctx *ctx, const vz_iphdr *iph)
{
	union flow f = {};

	f.flow.family = 4;
	f.flow.proto = iph->protocol;
	__builtin_memcpy(f.flow.src, &iph->saddr, 4);
	__builtin_memcpy(f.flow.dst, &iph->daddr, 4);
	if (!vz_ipv4_is_fragment(iph))
		flow_ports(ctx, ETH_HLEN + vz_ipv4_hlen(iph), &f);
	return vz_lb_flow_hash(f.words);
}

/* Extension headers (fragments among them) leave the ports out. */
VZ_INLINE __u32 flow_hash6(struct vz_ctx *ctx, const vz_ipv6hdr *ip6h)
{
	union flow f = {};

	f.flow.family = 6;
	f.flow.proto = ip6h->nexthdr;
	__builtin_memcpy(f.flow.src, ip6h->saddr.s6_addr, 16);
	__builtin_memcpy(f.flow.dst, ip6h->daddr.s6_addr, 16);
	flow_ports(ctx, ETH_HLEN + sizeof(*ip6h), &f);
	return vz_lb_flow_hash(f.words);
}

/* The member of group slot that hash picks; NULL for a broken group. */
VZ_INLINE struct vz_nexthop *group_member(__u32 slot, __u32 hash)
{
	struct vz_nexthop_group *group = vz_map_lookup(&router_groups, &slot);
	struct vz_nexthop *nh;
	__u32 bucket, index;

	if (!group || !group->buckets ||
	    group->buckets > VZ_ROUTER_GROUP_BUCKETS)
		return 0;
	bucket = hash % group->buckets;
	/*
	 * The verifier does not bound a remainder, and clang drops a mask it
	 * knows changes nothing unless kept from looking (barrier_var).
	 */
	__asm__ __volatile__("" : "+r"(bucket));
	index = group->member[bucket & (VZ_ROUTER_GROUP_BUCKETS - 1)];
	nh = vz_map_lookup(&router_nexthops, &index);
	/* groups do not nest */
	if (!nh || (nh->flags & VZ_NEXTHOP_GROUP))
		return 0;
	return nh;
}

/*
 * What a route says; *nh is set for VZ_ROUTE_FORWARD. A group's entry is
 * returned as is, for the caller to pick a member.
 */
VZ_INLINE int route_verdict(const struct vz_route *route,
			    struct vz_nexthop **nh, __u32 *slot)
{
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
	*slot = route->nexthop;
	*nh = vz_map_lookup(&router_nexthops, slot);
	if (!*nh)
		return count(VZ_PASS, VZ_ROUTER_UNRESOLVED);
	return VZ_REDIRECT_VERDICT; /* go on: forward */
}

/* Forward through nh, or PASS for the kernel to resolve it. */
VZ_INLINE int nexthop_verdict(const struct vz_nexthop *nh)
{
	if (!nh || !(nh->flags & VZ_NEXTHOP_RESOLVED))
		return count(VZ_PASS, VZ_ROUTER_UNRESOLVED);
	return VZ_REDIRECT_VERDICT;
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
	__u32 slot = 0;
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
		verdict = route_verdict(route, &nh, &slot);
		if (verdict != VZ_REDIRECT_VERDICT || !nh)
			return verdict;
		if (nh->flags & VZ_NEXTHOP_GROUP)
			nh = group_member(slot, flow_hash4(ctx, iph));
		verdict = nexthop_verdict(nh);
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
	__u32 slot = 0;
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
					&nh, &slot);
		if (verdict != VZ_REDIRECT_VERDICT || !nh)
			return verdict;
		if (nh->flags & VZ_NEXTHOP_GROUP)
			nh = group_member(slot, flow_hash6(ctx, ip6h));
		verdict = nexthop_verdict(nh);
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
