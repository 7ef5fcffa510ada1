// SPDX-License-Identifier: BSD-2-Clause
/*
 * IPv4 (RFC 791) for one host: check what comes in before anything reads
 * past the header, hand fragments to reasm.c and whole datagrams to ICMP or
 * UDP; build what goes out, fragmented to the MTU.
 */
#include <errno.h>
#include <stdlib.h>

#include <veloz/csum.h>

#include "sock/stack/stack_internal.h"

static void l4_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 proto,
		     __u64 now_ns)
{
	if (proto == IPPROTO_UDP)
		vz_udp_input(s, p, now_ns);
	else
		vz_icmp_input(s, p, now_ns);
}

/* The header at ETH_HLEN, options included, or NULL when it is refused
 * (counted). */
static const vz_iphdr *ip_check(struct vz_stack *s, const struct vz_ctx *ctx)
{
	const vz_iphdr *iph = vz_ipv4(ctx, ETH_HLEN);

	/* its options within the frame, its datagram too (the rest of the
	 * frame is Ethernet padding) */
	if (!iph || !vz_header(ctx, ETH_HLEN, vz_ipv4_hlen(iph)) ||
	    !vz_ipv4_len_ok(iph, vz_len(ctx) - ETH_HLEN)) {
		s->st.ip_bad_header++;
		return NULL;
	}
	if (vz_csum_fold(vz_sum32(vz_sum(0, iph, vz_ipv4_hlen(iph))))) {
		s->st.ip_bad_csum++;
		return NULL;
	}
	return iph;
}

static void ip_reassemble(struct vz_stack *s, struct vz_ip_pkt *p, __u8 proto,
			  __u64 now_ns)
{
	__u8 *whole;
	size_t len;

	if (vz_reasm_input(s, (const vz_iphdr *)p->iph, p->hlen, p->l4,
			   p->l4len, now_ns, &whole, &len) <= 0)
		return; /* held or refused, and counted */
	p->iph = whole;
	p->hlen = vz_ipv4_hlen((const vz_iphdr *)whole);
	p->l4 = whole + p->hlen;
	p->l4len = len - p->hlen;
	l4_input(s, p, proto, now_ns);
	free(whole);
}

void vz_ip_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns)
{
	const vz_iphdr *iph = ip_check(s, ctx);
	const struct ethhdr *eth = vz_eth(ctx);
	struct vz_ip_pkt p;

	if (!iph)
		return;
	memset(&p, 0, sizeof(p)); /* IPv4: v6 false */
	p.src = iph->saddr;
	p.dst = iph->daddr;
	if (p.dst != s->cfg.ip4) {
		s->st.rx_not_for_us++;
		return;
	}
	if (vz_ip4_martian(s, p.src)) { /* nobody we could answer */
		s->st.ip_bad_header++;
		return;
	}
	if (!iph->ttl) {
		s->st.ip_ttl_zero++;
		return;
	}
	if (iph->protocol != IPPROTO_UDP && iph->protocol != IPPROTO_ICMP) {
		s->st.rx_not_for_us++;
		return;
	}
	p.src_mac = eth->h_source;
	p.iph = (const __u8 *)iph;
	p.hlen = vz_ipv4_hlen(iph);
	p.l4 = p.iph + p.hlen;
	/* Ethernet padding stays out */
	p.l4len = ntohs(iph->tot_len) - p.hlen;
	if (vz_ipv4_is_fragment(iph))
		ip_reassemble(s, &p, iph->protocol, now_ns);
	else
		l4_input(s, &p, iph->protocol, now_ns);
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
	size_t room = ((size_t)s->cfg.mtu - sizeof(vz_iphdr)) & ~(size_t)7;
	bool fragmented = total + sizeof(vz_iphdr) > s->cfg.mtu;
	__u8 *ip = s->frame + ETH_HLEN;
	__u16 id = s->ip_id++, frag;

	if (total + sizeof(vz_iphdr) > VZ_IP_MAXLEN)
		return -EMSGSIZE;
	do {
		n = total - off;
		frag = (__u16)(off / 8);
		if (n + sizeof(vz_iphdr) > s->cfg.mtu) {
			n = room;
			frag |= VZ_IP_MF;
		}
		vz_eth_header(s, dst_mac, ETH_P_IP);
		ip_header(s, ip, sizeof(vz_iphdr) + n, id, frag, proto, dst);
		vz_copy_range(ip + sizeof(vz_iphdr), hdr, hlen, body, off, n);
		if (vz_stack_tx(s, ETH_HLEN + sizeof(vz_iphdr) + n))
			return -EAGAIN;
		if (fragmented)
			s->st.tx_fragments++;
		off += n;
	} while (off < total);
	return 0;
}
