/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * VLAN tags (802.1Q, 802.1ad) between Ethernet and L3: vz_parse_l2() walks
 * Ethernet and up to max_tags tags of the kinds a caller accepts, and says
 * which EtherType follows and where its header starts. How many tags and
 * which kinds is each program's own choice (ddos looks through two of
 * either kind, the dispatch stage one, udpd's steering one 802.1Q tag), so
 * both are arguments; give constants and the walk unrolls.
 */
#ifndef VELOZ_PROTO_VLAN_H
#define VELOZ_PROTO_VLAN_H

#include <veloz/proto/eth.h>

#define VZ_VLAN_HLEN 4
/* Tag kinds, for vz_parse_l2()'s tpids */
#define VZ_VLAN_8021Q 0x1 /* TPID 0x8100 */
#define VZ_VLAN_8021AD 0x2 /* TPID 0x88a8 (QinQ's outer tag) */

/* What lies under Ethernet and its VLAN tags. */
struct vz_l2 {
	__be16 proto; /* the EtherType after the last tag, network order */
	__u32 l3_off; /* where its header starts */
};

/* Is EtherType proto (network order) a tag of a kind in tpids? */
VZ_INLINE int vz_vlan_tpid(__be16 proto, __u32 tpids)
{
	return ((tpids & VZ_VLAN_8021Q) && proto == bpf_htons(ETH_P_8021Q)) ||
	       ((tpids & VZ_VLAN_8021AD) && proto == bpf_htons(ETH_P_8021AD));
}

/*
 * Ethernet and up to max_tags VLAN tags of the kinds in tpids (a tag
 * beyond them is left as the EtherType). 0 with l2 filled in, or -1 when
 * the frame ends inside Ethernet or a tag.
 */
VZ_INLINE int vz_parse_l2(const struct vz_ctx *ctx, struct vz_l2 *l2,
			  __u32 max_tags, __u32 tpids)
{
	struct ethhdr *eth = vz_eth(ctx);
	__u8 *tag;
	__u32 i;

	if (!eth)
		return -1;
	l2->proto = eth->h_proto;
	l2->l3_off = sizeof(*eth);
	for (i = 0; i < max_tags; i++) {
		if (!vz_vlan_tpid(l2->proto, tpids))
			break;
		tag = vz_header(ctx, l2->l3_off, VZ_VLAN_HLEN);
		if (!tag)
			return -1;
		/* TCI, then the EtherType of what the tag carries */
		__builtin_memcpy(&l2->proto, tag + 2, sizeof(l2->proto));
		l2->l3_off += VZ_VLAN_HLEN;
	}
	return 0;
}

#endif /* VELOZ_PROTO_VLAN_H */
