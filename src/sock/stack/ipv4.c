// SPDX-License-Identifier: BSD-2-Clause
/*
 * IPv4 (RFC 791) for one host: check what comes in before anything reads
 * past the header, hand fragments to reasm.c and whole datagrams to ICMP or
 * UDP; build what goes out, fragmented to the MTU.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include <veloz/csum.h>

#include "sock/stack/priv.h"

static void l4_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 proto,
		     __u64 now_ns)
{
	if (proto == VZ_IPPROTO_UDP)
		vz_udp_input(s, p, now_ns);
	else
		vz_icmp_input(s, p, now_ns);
}

/* Returns the header length, or 0 when the header is refused (counted). */
static size_t ip_check(struct vz_stack *s, const __u8 *ip, size_t avail)
{
	size_t hlen, tot;

	if (avail < VZ_IP_HLEN || (ip[0] >> 4) != 4 || (ip[0] & 0xf) < 5)
		goto bad;
	hlen = (size_t)(ip[0] & 0xf) * 4;
	tot = vz_get16(ip + 2);
	if (hlen > avail || tot < hlen || tot > avail)
		goto bad;
	if (vz_csum_fold(vz_sum32(vz_sum(0, ip, hlen)))) {
		s->st.ip_bad_csum++;
		return 0;
	}
	return hlen;
bad:
	s->st.ip_bad_header++;
	return 0;
}

static void ip_reassemble(struct vz_stack *s, struct vz_ip_pkt *p, __u8 proto,
			  __u64 now_ns)
{
	__u8 *whole;
	size_t len;

	if (vz_reasm_input(s, p->iph, p->hlen, p->l4, p->l4len, now_ns, &whole,
			   &len) <= 0)
		return; /* held or refused, and counted */
	p->iph = whole;
	p->hlen = (size_t)(whole[0] & 0xf) * 4;
	p->l4 = whole + p->hlen;
	p->l4len = len - p->hlen;
	l4_input(s, p, proto, now_ns);
	free(whole);
}

void vz_ip_input(struct vz_stack *s, const __u8 *frame, size_t len,
		 __u64 now_ns)
{
	const __u8 *ip = frame + VZ_ETH_HLEN;
	struct vz_ip_pkt p;
	__u16 frag;
	size_t hlen;

	hlen = ip_check(s, ip, len - VZ_ETH_HLEN);
	if (!hlen)
		return;
	memset(&p, 0, sizeof(p)); /* IPv4: v6 false */
	p.src = vz_get_be32(ip + 12);
	p.dst = vz_get_be32(ip + 16);
	if (p.dst != s->cfg.ip4) {
		s->st.rx_not_for_us++;
		return;
	}
	if (vz_ip4_martian(s, p.src)) { /* nobody we could answer */
		s->st.ip_bad_header++;
		return;
	}
	if (!ip[8]) {
		s->st.ip_ttl_zero++;
		return;
	}
	if (ip[9] != VZ_IPPROTO_UDP && ip[9] != VZ_IPPROTO_ICMP) {
		s->st.rx_not_for_us++;
		return;
	}
	p.src_mac = frame + VZ_ETH_ALEN;
	p.iph = ip;
	p.hlen = hlen;
	p.l4 = ip + hlen;
	p.l4len = vz_get16(ip + 2) - hlen; /* Ethernet padding stays out */
	frag = vz_get16(ip + 6);
	if (frag & (VZ_IP_MF | VZ_IP_OFFMASK))
		ip_reassemble(s, &p, ip[9], now_ns);
	else
		l4_input(s, &p, ip[9], now_ns);
}

static void ip_header(struct vz_stack *s, __u8 *ip, size_t len, __u16 id,
		      __u16 frag, __u8 proto, __be32 dst)
{
	__u16 check;

	ip[0] = 0x45;
	ip[1] = 0;
	vz_put16(ip + 2, (__u16)len);
	vz_put16(ip + 4, id);
	vz_put16(ip + 6, frag);
	ip[8] = VZ_IP_TTL;
	ip[9] = proto;
	ip[10] = ip[11] = 0;
	memcpy(ip + 12, &s->cfg.ip4, 4);
	memcpy(ip + 16, &dst, 4);
	check = vz_ipv4_csum(ip);
	memcpy(ip + 10, &check, 2);
}

/*
 * Send hdr + body (an L4 message) to dst through dst_mac, in fragments of
 * a multiple of 8 bytes when it does not fit the MTU. -EAGAIN when the port
 * refused a frame: the rest of the datagram would be useless, so it stops.
 */
int vz_ip_output(struct vz_stack *s, const __u8 *dst_mac, __u8 proto,
		 __be32 dst, const void *hdr, size_t hlen, const void *body,
		 size_t blen)
{
	size_t total = hlen + blen, off = 0, n;
	size_t room = ((size_t)s->cfg.mtu - VZ_IP_HLEN) & ~(size_t)7;
	bool fragmented = total + VZ_IP_HLEN > s->cfg.mtu;
	__u8 *ip = s->frame + VZ_ETH_HLEN;
	__u16 id = s->ip_id++, frag;

	if (total + VZ_IP_HLEN > VZ_IP_MAXLEN)
		return -EMSGSIZE;
	do {
		n = total - off;
		frag = (__u16)(off / 8);
		if (n + VZ_IP_HLEN > s->cfg.mtu) {
			n = room;
			frag |= VZ_IP_MF;
		}
		vz_eth_header(s, dst_mac, VZ_ETH_P_IP);
		ip_header(s, ip, VZ_IP_HLEN + n, id, frag, proto, dst);
		vz_copy_range(ip + VZ_IP_HLEN, hdr, hlen, body, off, n);
		if (vz_stack_tx(s, VZ_ETH_HLEN + VZ_IP_HLEN + n))
			return -EAGAIN;
		if (fragmented)
			s->st.tx_fragments++;
		off += n;
	} while (off < total);
	return 0;
}
