// SPDX-License-Identifier: BSD-2-Clause
/*
 * ICMPv6 (RFC 4443), the part a host owes: echo replies, port unreachable
 * for UDP nobody listens to (rate-limited with ICMP's bucket), and the way
 * to NDP (ndp.c). The checksum covers a pseudo-header and is mandatory.
 */
#include <arpa/inet.h>

#include <veloz/csum.h>

#include "sock/stack/priv.h"

#define ICMP6_DEST_UNREACH 1
#define ICMP6_PORT_UNREACH 4
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ICMP6_ND_NS 135
#define ICMP6_ND_NA 136
#define ICMP6_HLEN 8
/* An error quotes as much of the packet as fits the minimum MTU. */
#define ICMP6_QUOTE_MAX (VZ_IP6_MTU_MIN - VZ_IP6_HLEN - ICMP6_HLEN)

__u16 vz_icmp6_csum(const __u8 *src, const __u8 *dst, const void *hdr,
		    size_t hlen, const void *body, size_t blen)
{
	__u64 sum = vz_sum_pseudo6(src, dst, VZ_IPPROTO_ICMPV6,
				   (__u32)(hlen + blen));

	/* hlen is even: body's bytes keep their place in 16-bit words */
	sum = vz_sum(vz_sum(sum, hdr, hlen), body, blen);
	return vz_csum_fold(vz_sum32(sum));
}

static void echo_reply(struct vz_stack *s, const struct vz_ip_pkt *p)
{
	__u8 h[ICMP6_HLEN];
	__u16 check;

	memcpy(h, p->l4, sizeof(h));
	h[0] = ICMP6_ECHO_REPLY;
	h[2] = h[3] = 0;
	check = vz_icmp6_csum(p->dst6, p->src6, h, sizeof(h), p->l4 + sizeof(h),
			      p->l4len - sizeof(h));
	memcpy(h + 2, &check, 2);
	if (!vz_ip6_output(s, p->src_mac, VZ_IPPROTO_ICMPV6, p->dst6, p->src6,
			   VZ_IP6_HOPS, h, sizeof(h), p->l4 + sizeof(h),
			   p->l4len - sizeof(h)))
		s->st.icmp6_echo_out++;
}

void vz_icmp6_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 hops,
		    __u64 now_ns)
{
	__u8 type;

	if (p->l4len < 4 ||
	    vz_icmp6_csum(p->src6, p->dst6, p->l4, p->l4len, NULL, 0)) {
		s->st.icmp6_bad++;
		return;
	}
	type = p->l4[0];
	if (type == ICMP6_ND_NS || type == ICMP6_ND_NA) {
		vz_nd_input(s, p, hops, now_ns);
		return;
	}
	/* Beyond NDP, a group's traffic is not ours to answer; nor from the
	 * unspecified address, which only NDP probes use. */
	if (vz_ip6_is_multicast(p->dst6) || vz_ip6_is_zero(p->src6)) {
		s->st.icmp6_other++;
		return;
	}
	if (type != ICMP6_ECHO_REQUEST) {
		s->st.icmp6_other++;
		return;
	}
	if (p->l4len < ICMP6_HLEN) {
		s->st.icmp6_bad++;
		return;
	}
	s->st.icmp6_echo_in++;
	echo_reply(s, p);
}

void vz_icmp6_port_unreach(struct vz_stack *s, const struct vz_ip_pkt *p,
			   __u64 now_ns)
{
	__u8 h[ICMP6_HLEN] = { ICMP6_DEST_UNREACH, ICMP6_PORT_UNREACH };
	__u8 quote[ICMP6_QUOTE_MAX];
	size_t n = p->l4len;
	__u16 check;

	if (!vz_icmp_token(s, now_ns))
		return;
	/* The offending packet: its fixed header (as it arrived, or as
	 * reassembly rebuilt it) and what of its datagram fits. */
	memcpy(quote, p->iph, VZ_IP6_HLEN);
	if (n > sizeof(quote) - VZ_IP6_HLEN)
		n = sizeof(quote) - VZ_IP6_HLEN;
	memcpy(quote + VZ_IP6_HLEN, p->l4, n);
	n += VZ_IP6_HLEN;
	check = vz_icmp6_csum(p->dst6, p->src6, h, sizeof(h), quote, n);
	memcpy(h + 2, &check, 2);
	if (!vz_ip6_output(s, p->src_mac, VZ_IPPROTO_ICMPV6, p->dst6, p->src6,
			   VZ_IP6_HOPS, h, sizeof(h), quote, n))
		s->st.icmp6_unreach_out++;
}
