/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Ethernet: the header at the frame's start, what its type field and
 * addresses say, and the MAC swap of a reply. EtherTypes and lengths are
 * linux/if_ether.h's (ETH_P_IP, ETH_HLEN, ...), which ctx.h includes.
 */
#ifndef VELOZ_PROTO_ETH_H
#define VELOZ_PROTO_ETH_H

#include <veloz/proto/ctx.h>

/* The Ethernet header, or NULL when the frame is shorter than one. */
VZ_INLINE struct ethhdr *vz_eth(const struct vz_ctx *ctx)
{
	return vz_header(ctx, 0, sizeof(struct ethhdr));
}

/* Is the type field (network order) an EtherType, not an 802.3 length? */
VZ_INLINE int vz_eth_is_type(__be16 proto)
{
	return bpf_ntohs(proto) >= ETH_P_802_3_MIN;
}

/* A group address: multicast, broadcast included (the I/G bit). */
VZ_INLINE int vz_eth_is_multicast(const __u8 *addr)
{
	return addr[0] & 1;
}

/* Swap source and destination: the frame goes back where it came from. */
VZ_INLINE void vz_eth_swap(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

#endif /* VELOZ_PROTO_ETH_H */
