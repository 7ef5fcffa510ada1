// SPDX-License-Identifier: BSD-2-Clause
/*
 * Neighbour Discovery (RFC 4861), the part a host on one link owes:
 * answer solicitations for our addresses (duplicate address detection
 * probes included), learn from those who ask us, and solicit next hops
 * that vz_stack_send needs. The cache, the queue of datagrams waiting for
 * an answer, retries, expiry and refresh probes are the neighbour cache's
 * (arp.c), shared with ARP.
 *
 * Every message is validated as 7.1.1 and 7.1.2 say before anything is
 * learned: hop limit 255 (only an on-link sender can produce it), code 0,
 * at least 24 bytes, a unicast target, options each at least 8 bytes and
 * inside the message, link-layer address options of Ethernet's length.
 * What fails is counted in nd_bad.
 */
#include "sock/stack/stack_internal.h"

#define ND_MIN_LEN 24 /* type .. target */
#define ND_OPT_SLLA 1
#define ND_OPT_TLLA 2
#define ND_NA_SOLICITED 0x40
#define ND_NA_OVERRIDE 0x20
#define ND_MSG_LEN 32 /* ours: the fixed part and one address option */

static const __u8 all_nodes[16] = { 0xff, 2, 0, 0, 0, 0, 0, 0,
				    0,	  0, 0, 0, 0, 0, 0, 1 };

/*
 * Walk the options: 0 when every one is well-formed, -1 when one is not
 * (zero length, past the end, an address option of the wrong size).
 * *lla: the option of type `want`'s address, NULL when there is none.
 */
static int nd_options(const __u8 *o, size_t len, __u8 want, const __u8 **lla)
{
	*lla = NULL;
	while (len) {
		size_t n = (size_t)o[1] * 8;

		if (len < 8 || !n || n > len)
			return -1;
		if (o[0] == ND_OPT_SLLA || o[0] == ND_OPT_TLLA) {
			if (n != 8)
				return -1; /* Ethernet's: 6 bytes, 8 padded */
			if (o[0] == want)
				*lla = o + 2;
		}
		o += n;
		len -= n;
	}
	return 0;
}

static bool mac_ok(const __u8 *mac)
{
	return mac && !vz_eth_is_multicast(mac) && !vz_mac_is_zero(mac);
}

/* An NDP message from `src` to `dst` through dst_mac: the fixed part
 * (type, flags word, target) and our link-layer address option. */
static int nd_send(struct vz_stack *s, __u8 type, __u8 flags,
		   const __u8 *target, const __u8 *src, const __u8 *dst,
		   const __u8 *dst_mac)
{
	__u8 m[ND_MSG_LEN] = { type };
	__u16 check;

	m[4] = flags;
	memcpy(m + 8, target, 16);
	m[24] = type == VZ_ND_NEIGHBOUR_SOLICIT ? ND_OPT_SLLA : ND_OPT_TLLA;
	m[25] = 1;
	memcpy(m + 26, s->cfg.mac, ETH_ALEN);
	check = vz_icmp6_csum(src, dst, m, sizeof(m), NULL, 0);
	memcpy(m + 2, &check, 2);
	return vz_ip6_output(s, dst_mac, IPPROTO_ICMPV6, src, dst, VZ_ND_HOPS,
			     m, sizeof(m), NULL, 0)
		       ? -1
		       : 0;
}

int vz_nd_solicit(struct vz_stack *s, const __u8 *target, const __u8 *dst_mac)
{
	/* from the address of the target's scope (source selection) */
	const __u8 *src = vz_ip6_is_linklocal(target) ? s->ll6 : s->cfg.ip6;
	__u8 group[16], mac[ETH_ALEN];

	if (dst_mac)
		return nd_send(s, VZ_ND_NEIGHBOUR_SOLICIT, 0, target, src,
			       target, dst_mac);
	vz_ip6_snm(group, target);
	vz_ip6_mcast_mac(mac, group);
	return nd_send(s, VZ_ND_NEIGHBOUR_SOLICIT, 0, target, src, group, mac);
}

static void ns_input(struct vz_stack *s, const struct vz_ip_pkt *p,
		     const __u8 *target, __u64 now_ns)
{
	bool dad = vz_ip6_is_zero(p->src6);
	__u8 group[16], mac[ETH_ALEN];
	const __u8 *lla;

	vz_ip6_snm(group, target);
	/* RFC 4861 7.1.1: a probe goes to the solicited-node group and
	 * carries no address option. */
	if (nd_options(p->l4 + ND_MIN_LEN, p->l4len - ND_MIN_LEN, ND_OPT_SLLA,
		       &lla) ||
	    (lla && !mac_ok(lla)) ||
	    (dad && (lla || memcmp(p->dst6, group, 16)))) {
		s->st.nd_bad++;
		return;
	}
	if (!vz_ip6_ours(s, target)) {
		s->st.rx_not_for_us++;
		return;
	}
	s->st.nd_solicits_in++;
	if (lla) /* it talks to us: we will answer it (as ARP does) */
		vz_neigh_learn6(s, p->src6, lla, true, now_ns);
	if (dad) { /* defend the address: to all nodes, unsolicited */
		vz_ip6_mcast_mac(mac, all_nodes);
		if (!nd_send(s, VZ_ND_NEIGHBOUR_ADVERT, ND_NA_OVERRIDE, target,
			     target, all_nodes, mac))
			s->st.nd_adverts_out++;
		return;
	}
	if (!nd_send(s, VZ_ND_NEIGHBOUR_ADVERT,
		     ND_NA_SOLICITED | ND_NA_OVERRIDE, target, target, p->src6,
		     lla ? lla : p->src_mac))
		s->st.nd_adverts_out++;
}

static void na_input(struct vz_stack *s, const struct vz_ip_pkt *p,
		     const __u8 *target, __u64 now_ns)
{
	const __u8 *lla;

	/* 7.1.2: a solicited advertisement is never multicast */
	if (((p->l4[4] & ND_NA_SOLICITED) && vz_ip6_is_multicast(p->dst6)) ||
	    nd_options(p->l4 + ND_MIN_LEN, p->l4len - ND_MIN_LEN, ND_OPT_TLLA,
		       &lla) ||
	    (lla && !mac_ok(lla))) {
		s->st.nd_bad++;
		return;
	}
	s->st.nd_adverts_in++;
	/* Completes or refreshes an entry we have; makes none. */
	if (lla && !vz_ip6_ours(s, target))
		vz_neigh_learn6(s, target, lla, false, now_ns);
}

void vz_nd_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 hops,
		 __u64 now_ns)
{
	const struct vz_icmphdr *icmp = (const struct vz_icmphdr *)p->l4;
	const __u8 *target = p->l4 + 8;

	/* icmp6.c saw the type and checksum: the header's 4 bytes are there */
	if (hops != VZ_ND_HOPS || icmp->code || p->l4len < ND_MIN_LEN ||
	    vz_ip6_is_multicast(target)) {
		s->st.nd_bad++;
		return;
	}
	if (icmp->type == VZ_ND_NEIGHBOUR_SOLICIT)
		ns_input(s, p, target, now_ns);
	else
		na_input(s, p, target, now_ns);
}
