/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A frame's flow, read through veloz/proto/: its 5-tuple (the XDP stage's
 * flow key) and the input of its RSS hash. Restricted C on struct vz_ctx,
 * built for BPF (xdp_stage.bpf.c) and natively (toeplitz.c): one parse, so
 * that a flow has the same hash on every backend.
 */
#ifndef VZ_DISPATCH_FLOW_TUPLE_H
#define VZ_DISPATCH_FLOW_TUPLE_H

#include <veloz/proto/vlan.h>
#include <veloz/proto/ipv4.h>
#include <veloz/proto/ipv6.h>
#include <veloz/proto/l4.h>

#include "dispatch/xdp_stage.h"

/*
 * Ethernet (one VLAN tag, 802.1Q or 802.1ad), IPv4 or IPv6; the hash input
 * is the source and destination address, then the UDP or TCP ports when
 * they are in the frame and the packet is no fragment (an IPv6 next header
 * other than UDP or TCP, extension headers included, hashes the addresses
 * alone: so does every fragment, so a datagram stays on one worker). Fills
 * key and in; returns the hash input's length, 0 for a frame that is not IP
 * or is cut short, which hashes to 0. A caller that needs no key passes one
 * on its stack: inlined, the stores to it go.
 */
VZ_INLINE __u32 vz_flow_tuple(const struct vz_ctx *ctx,
			      struct vz_dsp_flow_key *key,
			      __u8 in[VZ_RSS_INPUT_MAX])
{
	struct vz_l4_ports *ports;
	__u32 addrs, l4;
	struct vz_l2 l2;
	__u8 next;

	if (vz_parse_l2(ctx, &l2, 1, VZ_VLAN_8021Q | VZ_VLAN_8021AD))
		return 0;
	if (l2.proto == bpf_htons(ETH_P_IP)) {
		vz_iphdr *ip = vz_ipv4(ctx, l2.l3_off);

		if (!ip)
			return 0;
		__builtin_memcpy(in, &ip->saddr, 4);
		__builtin_memcpy(in + 4, &ip->daddr, 4);
		__builtin_memcpy(key->src, &ip->saddr, 4);
		__builtin_memcpy(key->dst, &ip->daddr, 4);
		key->family = 4;
		key->proto = ip->protocol;
		addrs = 8;
		next = ip->protocol;
		/* fragments (first or later) hash the addresses alone */
		if (vz_ipv4_is_fragment(ip))
			return addrs;
		l4 = l2.l3_off + vz_ipv4_hlen(ip);
	} else if (l2.proto == bpf_htons(ETH_P_IPV6)) {
		vz_ipv6hdr *ip6 = vz_ipv6(ctx, l2.l3_off);

		if (!ip6)
			return 0;
		__builtin_memcpy(in, &ip6->saddr, 16);
		__builtin_memcpy(in + 16, &ip6->daddr, 16);
		__builtin_memcpy(key->src, &ip6->saddr, 16);
		__builtin_memcpy(key->dst, &ip6->daddr, 16);
		key->family = 6;
		key->proto = ip6->nexthdr;
		addrs = 32;
		next = ip6->nexthdr;
		l4 = l2.l3_off + sizeof(*ip6);
	} else {
		return 0;
	}
	if (next != IPPROTO_TCP && next != IPPROTO_UDP)
		return addrs;
	ports = vz_l4_ports(ctx, l4);
	if (!ports)
		return addrs;
	key->sport = ports->source;
	key->dport = ports->dest;
	__builtin_memcpy(in + addrs, ports, sizeof(*ports));
	return addrs + sizeof(*ports);
}

#endif
