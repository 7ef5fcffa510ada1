// SPDX-License-Identifier: BSD-2-Clause
/*
 * IPv6 (RFC 8200) for one host: check what comes in before anything reads
 * past the fixed header, hand fragments to reasm.c and whole packets to
 * ICMPv6 or UDP; build what goes out, fragmented when it does not fit the
 * MTU (a source may fragment in IPv6; routers may not).
 *
 * Accepted: packets to our address or our link-local one, and, for NDP
 * only, to the all-nodes group and our solicited-node groups. Extension
 * headers other than one Fragment header are not walked: such packets are
 * not for this host's two protocols (rx_not_for_us).
 */
#include <errno.h>
#include <stdlib.h>

#include "sock/stack/stack_internal.h"

static const __u8 all_nodes[16] = { 0xff, 2, 0, 0, 0, 0, 0, 0,
				    0,	  0, 0, 0, 0, 0, 0, 1 };
static const __u8 loopback[16] = { [15] = 1 };

bool vz_ip6_ours(const struct vz_stack *s, const __u8 *ip)
{
	return s->has6 &&
	       (!memcmp(ip, s->cfg.ip6, 16) || !memcmp(ip, s->ll6, 16));
}

bool vz_ip6_martian(const struct vz_stack *s, const __u8 *ip)
{
	return vz_ip6_is_multicast(ip) || vz_ip6_is_zero(ip) ||
	       !memcmp(ip, loopback, 16) || vz_ip6_is_mapped(ip) ||
	       vz_ip6_ours(s, ip);
}

/* All-nodes, or the solicited-node group of one of our addresses. */
static bool our_group(const struct vz_stack *s, const __u8 *dst)
{
	__u8 g[16];

	if (!memcmp(dst, all_nodes, 16))
		return true;
	vz_ip6_snm(g, s->cfg.ip6);
	if (!memcmp(dst, g, 16))
		return true;
	vz_ip6_snm(g, s->ll6);
	return !memcmp(dst, g, 16);
}

static void l4_input6(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 proto,
		      __u8 hops, __u64 now_ns)
{
	if (proto == IPPROTO_UDP)
		vz_udp_input(s, p, now_ns);
	else
		vz_icmp6_input(s, p, hops, now_ns);
}

/*
 * A Fragment header follows the fixed one. Fragmented NDP is refused
 * (RFC 6980): what comes out of reassembly, or an atomic fragment, goes on
 * with hop limit 0, which NDP's check rejects.
 */
static void frag_input(struct vz_stack *s, const struct vz_ctx *ctx,
		       struct vz_ip_pkt *p, size_t plen, bool mcast,
		       __u64 now_ns)
{
	const __u32 off = ETH_HLEN + sizeof(vz_ipv6hdr);
	const struct vz_ipv6_frag *fh;
	__u8 *whole;
	size_t wlen;

	/* in the payload, not merely in the frame */
	fh = plen >= sizeof(*fh) ? vz_header(ctx, off, sizeof(*fh)) : NULL;
	if (!fh) {
		s->st.ip6_bad_header++;
		return;
	}
	if (mcast ||
	    (fh->nexthdr != IPPROTO_UDP && fh->nexthdr != IPPROTO_ICMPV6)) {
		s->st.rx_not_for_us++;
		return;
	}
	p->l4 = (const __u8 *)(fh + 1);
	p->l4len = plen - sizeof(*fh);
	if (!vz_ipv6_frag_offset(fh) && !vz_ipv6_frag_more(fh)) {
		l4_input6(s, p, fh->nexthdr, 0, now_ns); /* atomic (RFC 6946) */
		return;
	}
	if (vz_reasm_input6(s, (const vz_ipv6hdr *)p->iph, fh, p->l4, p->l4len,
			    now_ns, &whole, &wlen) <= 0)
		return; /* held or refused, and counted */
	p->iph = whole;
	p->src6 = ((const vz_ipv6hdr *)whole)->saddr.s6_addr;
	p->dst6 = ((const vz_ipv6hdr *)whole)->daddr.s6_addr;
	p->l4 = whole + sizeof(vz_ipv6hdr);
	p->l4len = wlen - sizeof(vz_ipv6hdr);
	l4_input6(s, p, fh->nexthdr, 0, now_ns);
	free(whole);
}

void vz_ip6_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns)
{
	const vz_ipv6hdr *ip6 = vz_ipv6(ctx, ETH_HLEN);
	const __u8 *src, *dst;
	struct vz_ip_pkt p;
	size_t plen;
	bool mcast;
	__u8 nh;

	/* also a jumbogram's payload length 0 with its hop-by-hop option */
	if (!ip6 || vz_ipv6_end(ip6, ETH_HLEN) > vz_len(ctx)) {
		s->st.ip6_bad_header++;
		return;
	}
	plen = ntohs(ip6->payload_len);
	src = ip6->saddr.s6_addr;
	dst = ip6->daddr.s6_addr;
	nh = ip6->nexthdr;
	mcast = vz_ip6_is_multicast(dst);
	if (!s->has6 ||
	    (!vz_ip6_ours(s, dst) && !(mcast && our_group(s, dst)))) {
		s->st.rx_not_for_us++;
		return;
	}
	/* The unspecified source is a duplicate address detection probe:
	 * ICMPv6, and NDP judges it further. */
	if (vz_ip6_is_zero(src) ? nh != IPPROTO_ICMPV6
				: vz_ip6_martian(s, src)) {
		s->st.ip6_bad_header++;
		return;
	}
	p = (struct vz_ip_pkt){ .src_mac = vz_eth(ctx)->h_source,
				.iph = (const __u8 *)ip6,
				.hlen = sizeof(*ip6),
				.l4 = (const __u8 *)(ip6 + 1),
				.l4len = plen,
				.v6 = true,
				.src6 = src,
				.dst6 = dst };
	if (nh == IPPROTO_FRAGMENT) {
		frag_input(s, ctx, &p, plen, mcast, now_ns);
		return;
	}
	if ((nh != IPPROTO_UDP && nh != IPPROTO_ICMPV6) ||
	    (mcast && nh != IPPROTO_ICMPV6)) {
		s->st.rx_not_for_us++;
		return;
	}
	l4_input6(s, &p, nh, ip6->hop_limit, now_ns);
}

static void ip6_header(__u8 *ip, size_t plen, __u8 nh, __u8 hops,
		       const __u8 *src, const __u8 *dst)
{
	ip[0] = 0x60;
	ip[1] = ip[2] = ip[3] = 0;
	vz_put16(ip + 4, (__u16)plen);
	ip[6] = nh;
	ip[7] = hops;
	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
}

/*
 * Send hdr + body (an L4 message) from src to dst through dst_mac; above
 * the MTU in fragments of a multiple of 8 bytes, each with a Fragment
 * header. -EAGAIN when the port refused a frame (the rest would be
 * useless), -EMSGSIZE above IPv6's 65535-byte payload.
 */
int vz_ip6_output(struct vz_stack *s, const __u8 *dst_mac, __u8 proto,
		  const __u8 *src, const __u8 *dst, __u8 hops, const void *hdr,
		  size_t hlen, const void *body, size_t blen)
{
	size_t total = hlen + blen, off = 0, n;
	size_t room =
		((size_t)s->cfg.mtu - sizeof(vz_ipv6hdr) - VZ_IPV6_FRAG_HLEN) &
		~(size_t)7;
	__u8 *ip = s->frame + ETH_HLEN, *fh = ip + sizeof(vz_ipv6hdr);
	__be32 id;

	if (total > VZ_IP_MAXLEN - VZ_IPV6_FRAG_HLEN)
		return -EMSGSIZE;
	vz_eth_header(s, dst_mac, ETH_P_IPV6);
	if (sizeof(vz_ipv6hdr) + total <= s->cfg.mtu) {
		ip6_header(ip, total, proto, hops, src, dst);
		vz_copy_range(ip + sizeof(vz_ipv6hdr), hdr, hlen, body, 0,
			      total);
		return vz_stack_tx(s, ETH_HLEN + sizeof(vz_ipv6hdr) + total)
			       ? -EAGAIN
			       : 0;
	}
	id = htonl(++s->frag6_id);
	do {
		__u16 frag = (__u16)off;

		n = total - off;
		if (n > room) {
			n = room;
			frag |= 1; /* M: more follow */
		}
		vz_eth_header(s, dst_mac, ETH_P_IPV6);
		ip6_header(ip, VZ_IPV6_FRAG_HLEN + n, IPPROTO_FRAGMENT, hops,
			   src, dst);
		fh[0] = proto;
		fh[1] = 0;
		vz_put16(fh + 2, frag);
		memcpy(fh + 4, &id, 4);
		vz_copy_range(fh + VZ_IPV6_FRAG_HLEN, hdr, hlen, body, off, n);
		if (vz_stack_tx(s, ETH_HLEN + sizeof(vz_ipv6hdr) +
					   VZ_IPV6_FRAG_HLEN + n))
			return -EAGAIN;
		s->st.tx_fragments++;
		off += n;
	} while (off < total);
	return 0;
}
