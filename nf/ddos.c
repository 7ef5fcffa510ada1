/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nf/ddos.c: inline DDoS filter, the XDP paper's Gatebot-style use case:
 * rules drop or rate-limit attack traffic, everything else reaches the
 * kernel stack untouched.
 *
 * Per frame, in order:
 *   1. parse Ethernet (up to two VLAN tags), IPv4 or IPv6 (extension headers
 *      walked), and the TCP/UDP header when the frame carries one. Not IP:
 *      PASS. A bad or truncated IP header, a total length past the frame, an
 *      L4 header cut short: DROP, counted as malformed.
 *   2. source in an allow-list (LPM, ddos_allow4/6): PASS, before any rule.
 *   3. rules, slot 0 up, first match wins: DROP, ALLOW (PASS) or LIMIT (a
 *      token bucket per rule and source; PASS while it has a token). No match:
 *      PASS.
 *
 * Fragments: only an unfragmented packet or a first fragment carries ports
 * and flags, and it must carry the whole TCP (20 bytes) or UDP (8) header,
 * else it is malformed (RFC 1858's tiny fragments), as is a TCP fragment at
 * offset 8 (which could overwrite the flags). A rule with a dport or TCP
 * flags therefore never matches a non-first fragment; a rule without them
 * (source, protocol) matches every fragment. To stop a fragment flood, add
 * a rule without a port.
 *
 * IPv6: hop-by-hop, routing, destination options, fragment and AH headers
 * are walked, at most DDOS_IPV6_EXT_MAX of them; a longer chain is
 * malformed, so that no chain hides a port from the rules.
 *
 * Cost: legitimate traffic pays the parse, one LPM lookup and one array
 * lookup per slot below ddos_meta.end (the highest used slot + 1), so empty
 * slots past the last rule cost nothing and a hole costs one load.
 *
 * Live changes: the control plane adds a rule by writing the whole slot with
 * used = 0 (no packet looks at it), then the same bytes with used = 1, then
 * raises ddos_meta.end past it; it deletes one by writing used = 0 and then
 * lowering end. Each flip rewrites the slot with one byte different, or one
 * word, so a packet sees the old rule set or the new one. The window: a
 * packet whose walk read `used` of a slot just before a delete may still
 * apply that rule, and if the same slot is rewritten at that instant it may
 * see a mix of the two rules, for that one packet.
 *
 * Time: vz_time_ns() is CLOCK_MONOTONIC in both builds, under
 * BPF_PROG_TEST_RUN and native replay as on the wire, so a replay refills
 * buckets by the real time between packets (microseconds). Deterministic
 * tests use rate = 0 (burst packets, then none) or a rate too low to earn a
 * whole token within a replay.
 *
 * Token buckets are updated without atomics: a source spread over several
 * CPUs at once may get a few packets past its limit while they race.
 */
#include <veloz/nf.h>

VZ_LPM(ddos_allow4, struct vz_lpm4_key, __u32, VZ_DDOS_ALLOW_MAX);
VZ_LPM(ddos_allow6, struct vz_lpm6_key, __u32, VZ_DDOS_ALLOW_MAX);
VZ_ARRAY(ddos_rules, struct vz_ddos_rule, VZ_DDOS_RULES_MAX);
VZ_ARRAY(ddos_meta, struct vz_ddos_meta, 1);
VZ_LRU_HASH(ddos_buckets, struct vz_ddos_bucket_key, struct vz_ddos_bucket,
	    VZ_DDOS_BUCKETS_MAX);
VZ_PERCPU_ARRAY(ddos_rule_stats, struct vz_ddos_rule_stat, VZ_DDOS_RULES_MAX);
VZ_PERCPU_ARRAY(ddos_totals, struct vz_stat, VZ_DDOS_TOTAL_COUNT);
VZ_BTF_EXPORT(enum vz_ddos_total, ddos_total);
VZ_BTF_EXPORT(enum vz_ddos_action, ddos_action);

#define DDOS_NS_PER_S 1000000000ull
#define DDOS_VLAN_MAX 2
/* Longer chains are malformed: a filter must not be walked around. */
#define DDOS_IPV6_EXT_MAX 6

enum ddos_parse {
	DDOS_IP,
	DDOS_NOT_IP,
	DDOS_BAD,
};

/* What the rules look at. */
struct ddos_pkt {
	__u8 family; /* 4 or 6 */
	__u8 proto; /* L4 protocol, after any IPv6 extension headers */
	struct vz_l4 l4; /* has_ports: TCP or UDP header present */
	__u8 saddr[16]; /* IPv4 in saddr[0..3], the rest zero */
};

VZ_INLINE void ddos_count(__u32 which, __u64 frame_len)
{
	struct vz_stat *stat = vz_map_lookup(&ddos_totals, &which);

	if (stat) {
		stat->packets++;
		stat->bytes += frame_len;
	}
}

/*
 * The L4 header of an unfragmented packet or a first fragment; len is what
 * the IP header says follows. TCP and UDP headers must be there whole.
 */
VZ_INLINE int ddos_parse_l4(const struct vz_ctx *ctx, struct ddos_pkt *p,
			    __u32 off, __u32 len)
{
	return vz_parse_l4(ctx, p->proto, off, len, &p->l4) ? DDOS_BAD
							    : DDOS_IP;
}

/*
 * A non-first fragment carries no L4 header; a TCP one at offset 1 (8
 * bytes) could overwrite the first fragment's flags (RFC 1858).
 */
VZ_INLINE int ddos_fragment(__u32 frag_offset, __u8 proto)
{
	return frag_offset == 1 && proto == IPPROTO_TCP ? DDOS_BAD : DDOS_IP;
}

VZ_INLINE int ddos_parse_ipv4(const struct vz_ctx *ctx, struct ddos_pkt *p,
			      __u32 off, __u64 frame_len)
{
	vz_iphdr *iph = vz_ipv4(ctx, off);
	__u32 hlen, frag;

	if (!iph || !vz_ipv4_len_ok(iph, frame_len - off))
		return DDOS_BAD;
	hlen = vz_ipv4_hlen(iph);
	p->family = 4;
	p->proto = iph->protocol;
	__builtin_memcpy(p->saddr, &iph->saddr, 4);
	frag = vz_ipv4_frag_offset(iph);
	if (frag)
		return ddos_fragment(frag, p->proto);
	return ddos_parse_l4(ctx, p, off + hlen,
			     bpf_ntohs(iph->tot_len) - hlen);
}

VZ_INLINE int ddos_parse_ipv6(const struct vz_ctx *ctx, struct ddos_pkt *p,
			      __u32 off, __u64 frame_len)
{
	vz_ipv6hdr *ip6 = vz_ipv6(ctx, off);
	struct vz_ipv6_l4 l4;
	__u32 end;

	if (!ip6)
		return DDOS_BAD;
	end = vz_ipv6_end(ip6, off);
	if (end > frame_len)
		return DDOS_BAD;
	p->family = 6;
	__builtin_memcpy(p->saddr, &ip6->saddr, 16);
	if (vz_ipv6_skip_ext(ctx, ip6->nexthdr, off + sizeof(*ip6), end,
			     DDOS_IPV6_EXT_MAX, &l4))
		return DDOS_BAD;
	p->proto = l4.proto;
	if (l4.frag_offset)
		return ddos_fragment(l4.frag_offset, p->proto);
	return ddos_parse_l4(ctx, p, l4.off, end - l4.off);
}

VZ_INLINE int ddos_parse(const struct vz_ctx *ctx, struct ddos_pkt *p,
			 __u64 frame_len)
{
	struct vz_l2 l2;

	if (vz_parse_l2(ctx, &l2, DDOS_VLAN_MAX,
			VZ_VLAN_8021Q | VZ_VLAN_8021AD))
		return DDOS_NOT_IP;
	if (l2.proto == bpf_htons(ETH_P_IP))
		return ddos_parse_ipv4(ctx, p, l2.l3_off, frame_len);
	if (l2.proto == bpf_htons(ETH_P_IPV6))
		return ddos_parse_ipv6(ctx, p, l2.l3_off, frame_len);
	return DDOS_NOT_IP;
}

VZ_INLINE int ddos_allowlisted(const struct ddos_pkt *p)
{
	struct vz_lpm4_key key4 = { .prefixlen = 32 };
	struct vz_lpm6_key key6 = { .prefixlen = 128 };

	if (p->family == 4) {
		__builtin_memcpy(key4.addr, p->saddr, 4);
		return vz_map_lookup(&ddos_allow4, &key4) != 0;
	}
	__builtin_memcpy(key6.addr, p->saddr, 16);
	return vz_map_lookup(&ddos_allow6, &key6) != 0;
}

/* Does src fall in addr/prefixlen? words: 1 for IPv4, 4 for IPv6. */
VZ_INLINE int ddos_prefix_match(const __u8 *addr, const __u8 *src,
				__u32 prefixlen, __u32 words)
{
	__u32 w, a, s, mask;

	for (w = 0; w < 4; w++) {
		if (w >= words || prefixlen <= w * 32)
			break;
		mask = prefixlen >= (w + 1) * 32
			       ? 0xffffffffu
			       : ~((1u << ((w + 1) * 32 - prefixlen)) - 1);
		__builtin_memcpy(&a, addr + w * 4, 4);
		__builtin_memcpy(&s, src + w * 4, 4);
		if ((bpf_ntohl(a) ^ bpf_ntohl(s)) & mask)
			return 0;
	}
	return 1;
}

VZ_INLINE int ddos_rule_match(const struct vz_ddos_rule *r,
			      const struct ddos_pkt *p)
{
	if (r->family && (r->family != p->family ||
			  !ddos_prefix_match(r->addr, p->saddr, r->prefixlen,
					     p->family == 4 ? 1 : 4)))
		return 0;
	if (r->proto && r->proto != p->proto)
		return 0;
	if (r->dport && (!p->l4.has_ports || r->dport != p->l4.dport))
		return 0;
	if (r->tcp_mask && (!p->l4.has_ports || p->proto != IPPROTO_TCP ||
			    (p->l4.tcp_flags & r->tcp_mask) != r->tcp_value))
		return 0;
	return 1;
}

/*
 * Take a token from the bucket of (rule, source); 1 if there was one.
 * Tokens are counted in billionths, so the refill elapsed_ns * rate is exact
 * with no remainder to lose. The cap, burst * 1e9, stays below 2^60
 * (VZ_DDOS_BURST_MAX); a bucket idle long enough to fill is set full
 * without multiplying, so elapsed * rate < cap never overflows. A new rule
 * in the slot (another gen) starts its sources over with full buckets.
 */
VZ_INLINE int ddos_take_token(const struct vz_ddos_rule *r, __u32 slot,
			      const struct ddos_pkt *p)
{
	__u64 cap = (__u64)r->burst * DDOS_NS_PER_S, now = vz_time_ns();
	struct vz_ddos_bucket_key key;
	struct vz_ddos_bucket *b, fresh;
	__u64 elapsed;

	__builtin_memset(&key, 0, sizeof(key));
	key.rule = slot;
	key.family = p->family;
	__builtin_memcpy(key.addr, p->saddr, 16);
	b = vz_map_lookup(&ddos_buckets, &key);
	if (!b || b->gen != r->gen) {
		__builtin_memset(&fresh, 0, sizeof(fresh));
		fresh.tokens = cap;
		fresh.last_ns = now;
		fresh.gen = r->gen;
		if (fresh.tokens >= DDOS_NS_PER_S)
			fresh.tokens -= DDOS_NS_PER_S;
		vz_map_update(&ddos_buckets, &key, &fresh, BPF_ANY);
		return cap >= DDOS_NS_PER_S;
	}
	/* another CPU may have stamped a later time than our clock read */
	if (now > b->last_ns) {
		elapsed = now - b->last_ns;
		b->last_ns = now;
		if (r->rate && elapsed >= cap / r->rate)
			b->tokens = cap;
		else if (r->rate)
			b->tokens += elapsed * r->rate;
	}
	if (b->tokens > cap)
		b->tokens = cap;
	if (b->tokens < DDOS_NS_PER_S)
		return 0;
	b->tokens -= DDOS_NS_PER_S;
	return 1;
}

VZ_INLINE int ddos_apply_rules(const struct ddos_pkt *p, __u64 frame_len)
{
	struct vz_ddos_rule *rule = 0, *r;
	struct vz_ddos_rule_stat *stat;
	__u32 zero = 0, end, i, slot = 0;
	struct vz_ddos_meta *meta;

	meta = vz_map_lookup(&ddos_meta, &zero);
	end = meta ? meta->end : 0;
	/* only finds the rule: keeps the verifier's walk of 64 slots short */
	for (i = 0; i < VZ_DDOS_RULES_MAX; i++) {
		if (i >= end)
			break;
		r = vz_map_lookup(&ddos_rules, &i);
		if (!r)
			break;
		if (r->used && ddos_rule_match(r, p)) {
			rule = r;
			slot = i;
			break;
		}
	}
	if (!rule) {
		ddos_count(VZ_DDOS_PASSED, frame_len);
		return VZ_PASS;
	}
	stat = vz_map_lookup(&ddos_rule_stats, &slot);
	if (stat) {
		stat->packets++;
		stat->bytes += frame_len;
	}
	if (rule->action == VZ_DDOS_ALLOW)
		return VZ_PASS;
	if (rule->action == VZ_DDOS_LIMIT && ddos_take_token(rule, slot, p))
		return VZ_PASS;
	/* VZ_DDOS_DROP, an empty bucket, or an action this build lacks */
	if (stat)
		stat->dropped++;
	return VZ_DROP;
}

VZ_NF(ddos)
{
	/* IPv4 total length is checked against the whole frame, fragments
	 * included, as the stack will see it */
	__u64 frame_len = vz_frame_len(ctx);
	struct ddos_pkt p;
	int parsed;

	__builtin_memset(&p, 0, sizeof(p));
	parsed = ddos_parse(ctx, &p, frame_len);
	if (parsed == DDOS_NOT_IP) {
		ddos_count(VZ_DDOS_NOT_IP, frame_len);
		return VZ_PASS;
	}
	if (parsed == DDOS_BAD) {
		ddos_count(VZ_DDOS_MALFORMED, frame_len);
		return VZ_DROP;
	}
	if (ddos_allowlisted(&p)) {
		ddos_count(VZ_DDOS_ALLOWLISTED, frame_len);
		return VZ_PASS;
	}
	return ddos_apply_rules(&p, frame_len);
}
