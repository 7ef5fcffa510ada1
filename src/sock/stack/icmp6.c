// SPDX-License-Identifier: BSD-2-Clause
/*
 * ICMPv6 (RFC 4443), the part a host owes: echo replies, port unreachable
 * for UDP nobody listens to (rate-limited with ICMP's bucket), and the way
 * to NDP (ndp.c). The checksum covers a pseudo-header and is mandatory.
 */
#include <veloz/csum.h>

#include "sock/stack/stack_internal.h"

/* An error quotes as much of the packet as fits the minimum MTU. */
#define ICMP6_QUOTE_MAX \
	(IPV6_MIN_MTU - sizeof(vz_ipv6hdr) - sizeof(struct vz_icmphdr))

__u16 vz_icmp6_csum(const __u8 *src, const __u8 *dst, const void *hdr,
		    size_t hlen, const void *body, size_t blen)
{
	__u64 sum =
		vz_sum_pseudo6(src, dst, IPPROTO_ICMPV6, (__u32)(hlen + blen));

	/* hlen is even: body's bytes keep their place in 16-bit words */
	sum = vz_sum(vz_sum(sum, hdr, hlen), body, blen);
	return vz_csum_fold(vz_sum32(sum));
}

static void echo_reply(struct vz_stack *s, const struct vz_ip_pkt *p)
{
	struct vz_icmphdr h;

	memcpy(&h, p->l4, sizeof(h));
	h.type = ICMPV6_ECHO_REPLY;
	h.checksum = 0;
	h.checksum = vz_icmp6_csum(p->dst6, p->src6, &h, sizeof(h),
				   p->l4 + sizeof(h), p->l4len - sizeof(h));
	if (!vz_ip6_output(s, p->src_mac, IPPROTO_ICMPV6, p->dst6, p->src6,
			   VZ_IP6_HOPS, &h, sizeof(h), p->l4 + sizeof(h),
			   p->l4len - sizeof(h)))
		s->st.icmp6_echo_out++;
}

void vz_icmp6_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 hops,
		    __u64 now_ns)
{
	struct vz_ctx l4 = vz_l4_ctx(p);
	const struct vz_icmphdr *icmp = vz_icmp6(&l4, 0);

	if (!icmp ||
	    vz_icmp6_csum(p->src6, p->dst6, p->l4, p->l4len, NULL, 0)) {
		s->st.icmp6_bad++;
		return;
	}
	if (icmp->type == VZ_ND_NEIGHBOUR_SOLICIT ||
	    icmp->type == VZ_ND_NEIGHBOUR_ADVERT) {
		vz_nd_input(s, p, hops, now_ns);
		return;
	}
	/* Beyond NDP, a group's traffic is not ours to answer; nor from the
	 * unspecified address, which only NDP probes use. */
	if (vz_ip6_is_multicast(p->dst6) || vz_ip6_is_zero(p->src6)) {
		s->st.icmp6_other++;
		return;
	}
	if (icmp->type != ICMPV6_ECHO_REQUEST) {
		s->st.icmp6_other++;
		return;
	}
	if (!vz_icmp(&l4, 0)) { /* no room for the identifier and sequence */
		s->st.icmp6_bad++;
		return;
	}
	s->st.icmp6_echo_in++;
	echo_reply(s, p);
}

void vz_icmp6_port_unreach(struct vz_stack *s, const struct vz_ip_pkt *p,
			   __u64 now_ns)
{
	struct vz_icmphdr h = { .type = ICMPV6_DEST_UNREACH,
				.code = ICMPV6_PORT_UNREACH };
	__u8 quote[ICMP6_QUOTE_MAX];
	size_t n = p->l4len;

	if (!vz_icmp_token(s, now_ns))
		return;
	/* The offending packet: its fixed header (as it arrived, or as
	 * reassembly rebuilt it) and what of its datagram fits. */
	memcpy(quote, p->iph, sizeof(vz_ipv6hdr));
	if (n > sizeof(quote) - sizeof(vz_ipv6hdr))
		n = sizeof(quote) - sizeof(vz_ipv6hdr);
	memcpy(quote + sizeof(vz_ipv6hdr), p->l4, n);
	n += sizeof(vz_ipv6hdr);
	h.checksum = vz_icmp6_csum(p->dst6, p->src6, &h, sizeof(h), quote, n);
	if (!vz_ip6_output(s, p->src_mac, IPPROTO_ICMPV6, p->dst6, p->src6,
			   VZ_IP6_HOPS, &h, sizeof(h), quote, n))
		s->st.icmp6_unreach_out++;
}
