/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nf/lb.c: an L4 load balancer in the manner of Katran (the XDP paper's
 * third use case). A TCP or UDP packet to a VIP (address, port, protocol)
 * goes to one of the VIP's backends, chosen by Maglev consistent hashing
 * (Eisenbud et al., NSDI'16) of its 5-tuple, encapsulated in IP (IPIP,
 * IPv6-in-IPv6, 4in6 or 6in4: the backend's family picks the outer header)
 * and sent back out of the port it came in on. Everything else is the
 * host's and passes untouched.
 *
 * Choosing a backend:
 *   1. A packet that is not a TCP SYN looks its flow up in lb_conns, an LRU
 *      connection table: an established flow keeps its backend when the
 *      ring changes, unless that backend was removed (its VALID flag
 *      cleared) or belongs to another VIP; then the ring decides.
 *   2. A SYN always takes the ring (Katran's rule): it starts a new
 *      connection, which should go where the current ring says, and a
 *      stale entry left by an earlier connection on the same 5-tuple must
 *      not pin it.
 *   3. The ring: slot = jhash(5-tuple) % VZ_LB_RING_SIZE in the VIP's row
 *      of lb_ring; the backend found there is written to lb_conns. The
 *      hash is include/veloz/jhash.h; the control plane builds the Maglev
 *      table in python/veloz/control/maglev.py and writes it to lb_ring.
 *
 * What is not balanced:
 *   - ICMP, ICMPv6, other protocols, IPv6 extension headers, VLAN tags,
 *     non-IP: passed (no VIP key matches them; Katran handles ICMP for
 *     VIPs itself, here the kernel does).
 *   - TCP/UDP fragments (IPv4 MF or offset, IPv6 fragment header): passed
 *     and counted. A non-first fragment has no ports, so neither its VIP
 *     nor its flow can be known; all pieces of a datagram must take one
 *     path, and the kernel can reassemble them. Katran drops them instead.
 *   - Malformed IP (bad version or IHL, lengths beyond the frame, a TCP or
 *     UDP header cut short): dropped and counted, whatever the destination
 *     (the kernel would drop it too).
 *   - A VIP whose ring slot names no valid backend (a VIP without
 *     backends, or all of them drained by the health checks): dropped
 *     and counted, or passed and counted when the VIP says so
 *     (VZ_LB_VIP_PASS_ALL_DOWN), so the host can serve it instead.
 *
 * The outer header: TTL / hop limit 64; TOS / traffic class copied from the
 * inner header (RFC 6040 normal mode); outer IPv4 copies DF and the ID of
 * an inner IPv4 header (RFC 2003) and sets DF over IPv6 (IPv6 is never
 * fragmented on the way); outer IPv6 carries the flow hash as flow label
 * (RFC 6438) for ECMP in the underlay. Ethernet source and destination and
 * the outer source addresses come from lb_self. There is no MTU check: the
 * path to the backends must take 20 (or 40) bytes more than the clients
 * send.
 */
#include <veloz/nf.h>
#include <veloz/jhash.h>

#define LB_TTL 64

VZ_HASH(lb_vips, struct vz_lb_vip_key, struct vz_lb_vip, VZ_LB_MAX_VIPS);
VZ_ARRAY(lb_ring, __u32, VZ_LB_RING_ENTRIES);
VZ_ARRAY(lb_backends, struct vz_lb_backend, VZ_LB_MAX_BACKENDS);
VZ_LRU_HASH(lb_conns, struct vz_lb_flow, __u32, VZ_LB_MAX_CONNS);
VZ_ARRAY(lb_self, struct vz_lb_self, 1);
VZ_PERCPU_ARRAY(lb_vip_stats, struct vz_stat, VZ_LB_MAX_VIPS);
VZ_PERCPU_ARRAY(lb_backend_stats, struct vz_stat, VZ_LB_MAX_BACKENDS);
VZ_PERCPU_ARRAY(lb_counters, __u64, VZ_LB_COUNTERS);
VZ_BTF_EXPORT(enum vz_lb_counter, lb_counter);

/* What the parser learns about a packet. */
struct lb_packet {
	union {
		struct vz_lb_flow flow;
		__u32 words[sizeof(struct vz_lb_flow) / 4];
	};
	__u32 l3_len; /* inner IP header + payload, from the header */
	__u16 ip_id; /* network order; IPv4 only */
	__u16 df; /* VZ_IP_DF or 0, host order */
	__u8 tos; /* TOS or traffic class */
	__u8 syn;
};

VZ_INLINE void lb_count(__u32 counter)
{
	__u64 *value = vz_map_lookup(&lb_counters, &counter);

	if (value)
		*value += 1;
}

VZ_INLINE void lb_stat(void *map, __u32 index, __u64 bytes)
{
	struct vz_stat *stat = vz_map_lookup(map, &index);

	if (stat) {
		stat->packets++;
		stat->bytes += bytes;
	}
}

/* Maglev's slot: include/veloz/jhash.h, shared with the control plane. */
VZ_INLINE __u32 lb_flow_hash(const struct lb_packet *pkt)
{
	_Static_assert(sizeof(pkt->words) == 40, "the hash covers 10 words");
	return vz_lb_flow_hash(pkt->words);
}

/*
 * Ports and the SYN flag of the TCP or UDP header at off, whose IP packet
 * says l4_len bytes follow its IP header(s). Returns -1 when malformed.
 */
VZ_INLINE int lb_parse_l4(struct vz_ctx *ctx, __u32 off, __u32 l4_len,
			  struct lb_packet *pkt)
{
	struct vz_l4 l4;

	if (vz_parse_l4(ctx, pkt->flow.proto, off, l4_len, &l4))
		return -1;
	pkt->flow.sport = l4.sport;
	pkt->flow.dport = l4.dport;
	pkt->syn = l4.tcp_flags & VZ_TCP_SYN;
	return 0;
}

/* VZ_PASS, VZ_DROP, or 0 with pkt filled in. */
VZ_INLINE int lb_parse_ipv4(struct vz_ctx *ctx, __u64 frame_len,
			    struct lb_packet *pkt)
{
	vz_iphdr *iph = vz_ipv4(ctx, ETH_HLEN);
	__u32 ihl;

	/* options too: the kernel would drop a header cut short */
	if (!iph || !vz_ipv4_len_ok(iph, frame_len - ETH_HLEN) ||
	    !vz_header(ctx, ETH_HLEN, vz_ipv4_hlen(iph)))
		goto malformed;
	if (iph->protocol != IPPROTO_TCP && iph->protocol != IPPROTO_UDP)
		return VZ_PASS;
	if (vz_ipv4_is_fragment(iph)) {
		lb_count(VZ_LB_FRAGMENT);
		return VZ_PASS;
	}
	ihl = vz_ipv4_hlen(iph);
	pkt->flow.proto = iph->protocol;
	pkt->flow.family = 4;
	__builtin_memcpy(pkt->flow.src, &iph->saddr, 4);
	__builtin_memcpy(pkt->flow.dst, &iph->daddr, 4);
	pkt->l3_len = bpf_ntohs(iph->tot_len);
	pkt->ip_id = iph->id;
	pkt->df = bpf_ntohs(iph->frag_off) & VZ_IP_DF;
	pkt->tos = iph->tos;
	if (lb_parse_l4(ctx, ETH_HLEN + ihl, pkt->l3_len - ihl, pkt))
		goto malformed;
	return 0;
malformed:
	lb_count(VZ_LB_MALFORMED);
	return VZ_DROP;
}

VZ_INLINE int lb_parse_ipv6(struct vz_ctx *ctx, __u64 frame_len,
			    struct lb_packet *pkt)
{
	vz_ipv6hdr *ip6h = vz_ipv6(ctx, ETH_HLEN);
	__u32 payload_len;

	if (!ip6h || vz_ipv6_end(ip6h, ETH_HLEN) > frame_len)
		goto malformed;
	if (ip6h->nexthdr == IPPROTO_FRAGMENT) {
		lb_count(VZ_LB_FRAGMENT);
		return VZ_PASS;
	}
	if (ip6h->nexthdr != IPPROTO_TCP && ip6h->nexthdr != IPPROTO_UDP)
		return VZ_PASS;
	payload_len = bpf_ntohs(ip6h->payload_len);
	pkt->flow.proto = ip6h->nexthdr;
	pkt->flow.family = 6;
	__builtin_memcpy(pkt->flow.src, &ip6h->saddr, 16);
	__builtin_memcpy(pkt->flow.dst, &ip6h->daddr, 16);
	pkt->l3_len = sizeof(*ip6h) + payload_len;
	pkt->tos = vz_ipv6_tclass(ip6h);
	if (lb_parse_l4(ctx, ETH_HLEN + sizeof(*ip6h), payload_len, pkt))
		goto malformed;
	return 0;
malformed:
	lb_count(VZ_LB_MALFORMED);
	return VZ_DROP;
}

/* The entry of backend id, if it may take traffic for the VIP at index vip. */
VZ_INLINE struct vz_lb_backend *lb_backend(__u32 id, __u32 vip)
{
	struct vz_lb_backend *backend;

	if (!id)
		return 0;
	backend = vz_map_lookup(&lb_backends, &id);
	if (!backend || !(backend->flags & VZ_LB_BACKEND_VALID) ||
	    backend->vip != vip ||
	    (backend->family != 4 && backend->family != 6))
		return 0;
	return backend;
}

/* The backend an established flow is pinned to, if still there. */
VZ_INLINE struct vz_lb_backend *lb_pinned(const struct lb_packet *pkt,
					  __u32 vip, __u32 *id)
{
	struct vz_lb_backend *backend;
	__u32 *pinned;

	pinned = vz_map_lookup(&lb_conns, &pkt->flow);
	if (!pinned)
		return 0;
	*id = *pinned;
	backend = lb_backend(*id, vip);
	lb_count(backend ? VZ_LB_CONN_HIT : VZ_LB_CONN_STALE);
	return backend;
}

/*
 * Wrap the frame's IP packet in an outer header towards backend, with a
 * new Ethernet header. Returns VZ_TX or VZ_DROP.
 */
VZ_INLINE int lb_encap(struct vz_ctx *ctx, const struct lb_packet *pkt,
		       const struct vz_lb_backend *backend, __u32 hash)
{
	__u32 zero = 0, outer_len;
	struct vz_lb_self *self = vz_map_lookup(&lb_self, &zero);
	__u8 inner_proto = pkt->flow.family == 4 ? IPPROTO_IPIP : IPPROTO_IPV6;
	struct ethhdr *eth;

	if (!self)
		return VZ_DROP;
	outer_len =
		backend->family == 4 ? sizeof(vz_iphdr) : sizeof(vz_ipv6hdr);
	if (vz_adjust_head(ctx, -(int)outer_len)) {
		lb_count(VZ_LB_ENCAP_FAILED);
		return VZ_DROP;
	}
	if (backend->family == 4) {
		vz_iphdr *iph;

		eth = vz_header(ctx, 0, ETH_HLEN + sizeof(*iph));
		if (!eth)
			return VZ_DROP;
		iph = (vz_iphdr *)(eth + 1);
		eth->h_proto = bpf_htons(ETH_P_IP);
		*(__u8 *)iph = 0x45;
		iph->tos = pkt->tos;
		/* l3_len is at most a frame's length: no overflow */
		iph->tot_len = bpf_htons((__u16)(pkt->l3_len + sizeof(*iph)));
		if (pkt->flow.family == 4) {
			iph->id = pkt->ip_id;
			iph->frag_off = bpf_htons(pkt->df);
		} else {
			iph->id = 0;
			iph->frag_off = bpf_htons(VZ_IP_DF);
		}
		iph->ttl = LB_TTL;
		iph->protocol = inner_proto;
		iph->check = 0;
		__builtin_memcpy(&iph->saddr, self->source4, 4);
		__builtin_memcpy(&iph->daddr, backend->addr, 4);
		iph->check = vz_ipv4_csum(iph);
	} else {
		vz_ipv6hdr *ip6h;

		eth = vz_header(ctx, 0, ETH_HLEN + sizeof(*ip6h));
		if (!eth)
			return VZ_DROP;
		ip6h = (vz_ipv6hdr *)(eth + 1);
		eth->h_proto = bpf_htons(ETH_P_IPV6);
		*(vz_be32 *)ip6h = bpf_htonl(6u << 28 | (__u32)pkt->tos << 20 |
					     (hash & 0xfffff));
		ip6h->payload_len = bpf_htons((__u16)pkt->l3_len);
		ip6h->nexthdr = inner_proto;
		ip6h->hop_limit = LB_TTL;
		__builtin_memcpy(&ip6h->saddr, self->source6, 16);
		__builtin_memcpy(&ip6h->daddr, backend->addr, 16);
	}
	__builtin_memcpy(eth->h_dest, self->next_hop_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, self->mac, ETH_ALEN);
	return VZ_TX;
}

VZ_NF(lb)
{
	struct ethhdr *eth = vz_eth(ctx);
	__u64 frame_len = vz_frame_len(ctx);
	struct vz_lb_backend *backend = 0;
	struct vz_lb_vip_key vip_key;
	struct lb_packet pkt;
	struct vz_lb_vip *vip;
	__u32 hash, index, id = 0, slot, *ring;
	int verdict;

	if (!eth)
		return VZ_DROP;
	__builtin_memset(&pkt, 0, sizeof(pkt));
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		verdict = lb_parse_ipv4(ctx, frame_len, &pkt);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		verdict = lb_parse_ipv6(ctx, frame_len, &pkt);
	else
		return VZ_PASS;
	if (verdict)
		return verdict;

	__builtin_memcpy(vip_key.addr, pkt.flow.dst, 16);
	vip_key.port = pkt.flow.dport;
	vip_key.proto = pkt.flow.proto;
	vip_key.family = pkt.flow.family;
	vip = vz_map_lookup(&lb_vips, &vip_key);
	if (!vip)
		return VZ_PASS;
	index = vip->index;
	if (index >= VZ_LB_MAX_VIPS) {
		lb_count(VZ_LB_NO_BACKEND);
		return VZ_DROP;
	}
	lb_stat(&lb_vip_stats, index, frame_len);

	hash = lb_flow_hash(&pkt);
	if (!pkt.syn)
		backend = lb_pinned(&pkt, index, &id);
	if (!backend) {
		slot = index * VZ_LB_RING_SIZE + hash % VZ_LB_RING_SIZE;
		ring = vz_map_lookup(&lb_ring, &slot);
		id = ring ? *ring : 0;
		backend = lb_backend(id, index);
		if (!backend) {
			if (vip->flags & VZ_LB_VIP_PASS_ALL_DOWN) {
				lb_count(VZ_LB_ALL_DOWN_PASS);
				return VZ_PASS;
			}
			lb_count(VZ_LB_NO_BACKEND);
			return VZ_DROP;
		}
		lb_count(VZ_LB_RING);
		vz_map_update(&lb_conns, &pkt.flow, &id, BPF_ANY);
	}
	lb_stat(&lb_backend_stats, id, frame_len);
	return lb_encap(ctx, &pkt, backend, hash);
}
