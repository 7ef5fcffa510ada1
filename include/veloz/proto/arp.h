/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ARP (RFC 826) for Ethernet and IPv4, the one kind veloz speaks: the whole
 * body, fixed part and addresses. linux/if_arp.h's struct arphdr stops
 * before the addresses (and pulls in netdevice.h), so the body is defined
 * here, with its field names. The protocol addresses are bytes: at offset
 * 14 of the body a __be32 would not be aligned.
 *
 * vz_arp() checks what makes it Ethernet/IPv4 ARP; what an operation or an
 * address is worth is the caller's to judge.
 */
#ifndef VELOZ_PROTO_ARP_H
#define VELOZ_PROTO_ARP_H

#include <veloz/proto/eth.h>

#define VZ_ARP_HRD_ETHER 1 /* hardware type: Ethernet (ARPHRD_ETHER) */
#define VZ_ARP_OP_REQUEST 1
#define VZ_ARP_OP_REPLY 2

struct vz_arphdr {
	__be16 ar_hrd; /* hardware type */
	__be16 ar_pro; /* protocol type: an EtherType */
	__u8 ar_hln; /* hardware address length */
	__u8 ar_pln; /* protocol address length */
	__be16 ar_op;
	__u8 ar_sha[ETH_ALEN]; /* sender hardware address */
	__u8 ar_sip[4]; /* sender IPv4 address, network order */
	__u8 ar_tha[ETH_ALEN]; /* target hardware address */
	__u8 ar_tip[4]; /* target IPv4 address, network order */
};

/* The ARP body at off if it is Ethernet/IPv4 ARP, else NULL. */
VZ_INLINE struct vz_arphdr *vz_arp(const struct vz_ctx *ctx, __u32 off)
{
	struct vz_arphdr *arp = vz_header(ctx, off, sizeof(*arp));

	if (!arp || arp->ar_hrd != bpf_htons(VZ_ARP_HRD_ETHER) ||
	    arp->ar_pro != bpf_htons(ETH_P_IP) || arp->ar_hln != ETH_ALEN ||
	    arp->ar_pln != 4)
		return 0;
	return arp;
}

/* An IPv4 address of the body (ar_sip, ar_tip), network order. */
VZ_INLINE __be32 vz_arp_ip(const __u8 *field)
{
	__be32 ip;

	__builtin_memcpy(&ip, field, sizeof(ip));
	return ip;
}

#endif /* VELOZ_PROTO_ARP_H */
