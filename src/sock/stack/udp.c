// SPDX-License-Identifier: BSD-2-Clause
/*
 * UDP (RFC 768): check the length and the checksum (when the sender set
 * one; over IPv6 it must, RFC 8200 8.1) before a socket sees a byte;
 * always checksum what we send.
 */
#include <arpa/inet.h>

#include <veloz/csum.h>

#include "sock/stack/priv.h"

void vz_udp_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u64 now_ns)
{
	const __u8 *u = p->l4;
	struct vz_dgram_meta m;
	__u16 ulen, check;
	__u64 sum;

	/* Bytes past the UDP length are not ours to judge (the UDP options
	 * draft puts options there): a shorter length is fine, a longer one
	 * is a lie. */
	ulen = p->l4len >= VZ_UDP_HLEN ? vz_get16(u + 4) : 0;
	if (ulen < VZ_UDP_HLEN || ulen > p->l4len) {
		s->st.udp_bad_len++;
		return;
	}
	memcpy(&check, u + 6, 2);
	if (check || p->v6) {
		sum = p->v6 ? vz_sum_pseudo6(p->src6, p->dst6, VZ_IPPROTO_UDP,
					     ulen)
			    : vz_sum_pseudo(p->src, p->dst, VZ_IPPROTO_UDP,
					    ulen);
		if (!check || vz_csum_fold(vz_sum32(vz_sum(sum, u, ulen)))) {
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
	memcpy(&m.src_port, u, 2);
	memcpy(&m.dst_port, u + 2, 2);
	if (!s->ops.deliver(s->ops.opaque, &m, u + VZ_UDP_HLEN,
			    ulen - VZ_UDP_HLEN)) {
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
	__u16 ulen = (__u16)(VZ_UDP_HLEN + len), check;
	__u8 h[VZ_UDP_HLEN];
	__u64 sum;

	memcpy(h, &m->src_port, 2);
	memcpy(h + 2, &m->dst_port, 2);
	vz_put16(h + 4, ulen);
	h[6] = h[7] = 0;
	sum = m->v6 ? vz_sum_pseudo6(m->src_ip6, m->dst_ip6, VZ_IPPROTO_UDP,
				     ulen)
		    : vz_sum_pseudo(m->src_ip, m->dst_ip, VZ_IPPROTO_UDP, ulen);
	sum = vz_sum(vz_sum(sum, h, sizeof(h)), payload, len);
	check = vz_csum_fold(vz_sum32(sum));
	if (!check)
		check = 0xffff; /* 0 would mean "no checksum" */
	memcpy(h + 6, &check, 2);
	if (m->v6)
		return vz_ip6_output(s, dst_mac, VZ_IPPROTO_UDP, m->src_ip6,
				     m->dst_ip6, VZ_IP6_HOPS, h, sizeof(h),
				     payload, len);
	return vz_ip_output(s, dst_mac, VZ_IPPROTO_UDP, m->dst_ip, h, sizeof(h),
			    payload, len);
}
