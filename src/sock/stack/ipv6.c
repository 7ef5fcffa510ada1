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
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include "sock/stack/priv.h"

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
	if (proto == VZ_IPPROTO_UDP)
		vz_udp_input(s, p, now_ns);
	else
		vz_icmp6_input(s, p, hops, now_ns);
}

/*
 * A Fragment header follows the fixed one. Fragmented NDP is refused
 * (RFC 6980): what comes out of reassembly, or an atomic fragment, goes on
 * with hop limit 0, which NDP's check rejects.
 */
static void frag_input(struct vz_stack *s, struct vz_ip_pkt *p, size_t plen,
		       bool mcast, __u64 now_ns)
{
	const __u8 *fh = p->iph + VZ_IP6_HLEN;
	__u8 proto, *whole;
	size_t wlen;
	__u16 frag;

	if (plen < VZ_IP6_FRAG_HLEN) {
		s->st.ip6_bad_header++;
		return;
	}
	proto = fh[0];
	if (mcast || (proto != VZ_IPPROTO_UDP && proto != VZ_IPPROTO_ICMPV6)) {
		s->st.rx_not_for_us++;
		return;
	}
	frag = vz_get16(fh + 2);
	if (!(frag & 0xfff8) && !(frag & 1)) { /* atomic (RFC 6946) */
		p->l4 = fh + VZ_IP6_FRAG_HLEN;
		p->l4len = plen - VZ_IP6_FRAG_HLEN;
		l4_input6(s, p, proto, 0, now_ns);
		return;
	}
	if (vz_reasm_input6(s, p->iph, fh, fh + VZ_IP6_FRAG_HLEN,
			    plen - VZ_IP6_FRAG_HLEN, now_ns, &whole,
			    &wlen) <= 0)
		return; /* held or refused, and counted */
	p->iph = whole;
	p->src6 = whole + 8;
	p->dst6 = whole + 24;
	p->l4 = whole + VZ_IP6_HLEN;
	p->l4len = wlen - VZ_IP6_HLEN;
	l4_input6(s, p, proto, 0, now_ns);
	free(whole);
}

void vz_ip6_input(struct vz_stack *s, const __u8 *frame, size_t len,
		  __u64 now_ns)
{
	const __u8 *ip = frame + VZ_ETH_HLEN, *src, *dst;
	size_t avail = len - VZ_ETH_HLEN, plen;
	struct vz_ip_pkt p;
	bool mcast;
	__u8 nh;

	if (avail < VZ_IP6_HLEN || (ip[0] >> 4) != 6) {
		s->st.ip6_bad_header++;
		return;
	}
	plen = vz_get16(ip + 4);
	if (VZ_IP6_HLEN + plen > avail) { /* also a jumbogram's 0 + options */
		s->st.ip6_bad_header++;
		return;
	}
	src = ip + 8;
	dst = ip + 24;
	nh = ip[6];
	mcast = vz_ip6_is_multicast(dst);
	if (!s->has6 ||
	    (!vz_ip6_ours(s, dst) && !(mcast && our_group(s, dst)))) {
		s->st.rx_not_for_us++;
		return;
	}
	/* The unspecified source is a duplicate address detection probe:
	 * ICMPv6, and NDP judges it further. */
	if (vz_ip6_is_zero(src) ? nh != VZ_IPPROTO_ICMPV6
				: vz_ip6_martian(s, src)) {
		s->st.ip6_bad_header++;
		return;
	}
	p = (struct vz_ip_pkt){ .src_mac = frame + VZ_ETH_ALEN,
				.iph = ip,
				.hlen = VZ_IP6_HLEN,
				.l4 = ip + VZ_IP6_HLEN,
				.l4len = plen,
				.v6 = true,
				.src6 = src,
				.dst6 = dst };
	if (nh == VZ_IPPROTO_FRAGMENT) {
		frag_input(s, &p, plen, mcast, now_ns);
		return;
	}
	if ((nh != VZ_IPPROTO_UDP && nh != VZ_IPPROTO_ICMPV6) ||
	    (mcast && nh != VZ_IPPROTO_ICMPV6)) {
		s->st.rx_not_for_us++;
		return;
	}
	l4_input6(s, &p, nh, ip[7], now_ns);
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
	size_t room = ((size_t)s->cfg.mtu - VZ_IP6_HLEN - VZ_IP6_FRAG_HLEN) &
		      ~(size_t)7;
	__u8 *ip = s->frame + VZ_ETH_HLEN, *fh = ip + VZ_IP6_HLEN;
	__be32 id;

	if (total > VZ_IP_MAXLEN - VZ_IP6_FRAG_HLEN)
		return -EMSGSIZE;
	vz_eth_header(s, dst_mac, VZ_ETH_P_IPV6);
	if (VZ_IP6_HLEN + total <= s->cfg.mtu) {
		ip6_header(ip, total, proto, hops, src, dst);
		vz_copy_range(ip + VZ_IP6_HLEN, hdr, hlen, body, 0, total);
		return vz_stack_tx(s, VZ_ETH_HLEN + VZ_IP6_HLEN + total)
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
		vz_eth_header(s, dst_mac, VZ_ETH_P_IPV6);
		ip6_header(ip, VZ_IP6_FRAG_HLEN + n, VZ_IPPROTO_FRAGMENT, hops,
			   src, dst);
		fh[0] = proto;
		fh[1] = 0;
		vz_put16(fh + 2, frag);
		memcpy(fh + 4, &id, 4);
		vz_copy_range(fh + VZ_IP6_FRAG_HLEN, hdr, hlen, body, off, n);
		if (vz_stack_tx(s, VZ_ETH_HLEN + VZ_IP6_HLEN +
					   VZ_IP6_FRAG_HLEN + n))
			return -EAGAIN;
		s->st.tx_fragments++;
		off += n;
	} while (off < total);
	return 0;
}
