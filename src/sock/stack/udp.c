// SPDX-License-Identifier: BSD-2-Clause
/*
 * UDP (RFC 768): check the length and the checksum (when the sender set
 * one; over IPv6 it must, RFC 8200 8.1) before a socket sees a byte;
 * always checksum what we send.
 */
#include <veloz/csum.h>

#include "sock/stack/stack_internal.h"

void vz_udp_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u64 now_ns)
{
	struct vz_ctx l4 = vz_l4_ctx(p);
	const vz_udphdr *uh = vz_udp(&l4, 0, p->l4len);
	struct vz_dgram_meta m;
	__u16 ulen;
	__u64 sum;

	if (!uh) {
		s->st.udp_bad_len++;
		return;
	}
	ulen = ntohs(uh->len);
	if (uh->check || p->v6) {
		sum = p->v6 ? vz_sum_pseudo6(p->src6, p->dst6, IPPROTO_UDP,
					     ulen)
			    : vz_sum_pseudo(p->src, p->dst, IPPROTO_UDP, ulen);
		if (!uh->check ||
		    vz_csum_fold(vz_sum32(vz_sum(sum, uh, ulen)))) {
			s->st.udp_bad_csum++;
			return;
		}
	}
	memset(&m, 0, sizeof(m));
	m.src_ip = p->src;
	m.dst_ip = p->dst;
	if (p->v6) {
		m.v6 = 1;
		memcpy(m.src_ip6, p->src6, 16);
		memcpy(m.dst_ip6, p->dst6, 16);
	}
	m.src_port = uh->source;
	m.dst_port = uh->dest;
	if (!s->ops.deliver(s->ops.opaque, &m, uh + 1, ulen - sizeof(*uh))) {
		s->st.rx_delivered++;
		return;
	}
	s->st.udp_no_port++;
	if (p->v6)
		vz_icmp6_port_unreach(s, p, now_ns);
	else
		vz_icmp_port_unreach(s, p, now_ns);
}

int vz_udp_output(struct vz_stack *s, const __u8 *dst_mac,
		  const struct vz_dgram_meta *m, const void *payload,
		  size_t len)
{
	__u16 ulen = (__u16)(sizeof(vz_udphdr) + len);
	vz_udphdr h = { .source = m->src_port,
			.dest = m->dst_port,
			.len = htons(ulen) };
	__u64 sum;

	sum = m->v6 ? vz_sum_pseudo6(m->src_ip6, m->dst_ip6, IPPROTO_UDP, ulen)
		    : vz_sum_pseudo(m->src_ip, m->dst_ip, IPPROTO_UDP, ulen);
	sum = vz_sum(vz_sum(sum, &h, sizeof(h)), payload, len);
	h.check = vz_csum_fold(vz_sum32(sum));
	if (!h.check)
		h.check = 0xffff; /* 0 would mean "no checksum" */
	if (m->v6)
		return vz_ip6_output(s, dst_mac, IPPROTO_UDP, m->src_ip6,
				     m->dst_ip6, VZ_IP6_HOPS, &h, sizeof(h),
				     payload, len);
	return vz_ip_output(s, dst_mac, IPPROTO_UDP, m->dst_ip, &h, sizeof(h),
			    payload, len);
}
