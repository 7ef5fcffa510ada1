/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * TCP and UDP: the ports (the first 4 bytes of both headers), the whole
 * header, vz_parse_l4(), which fills in what filters and balancers look
 * at, and vz_udp(), the UDP header of a datagram that ends here. TCP flags are
 * read from byte 13 by hand: bitfield order is the compiler's.
 */
#ifndef VELOZ_PROTO_L4_H
#define VELOZ_PROTO_L4_H

#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <veloz/proto/ctx.h>

#ifdef VZ_BUILD_BPF
typedef struct tcphdr vz_tcphdr;
#else
typedef struct tcphdr vz_tcphdr __attribute__((aligned(2))); /* see ctx.h */
#endif
typedef struct udphdr vz_udphdr; /* 16-bit fields only: aligned as is */

#define VZ_TCP_FIN 0x01
#define VZ_TCP_SYN 0x02
#define VZ_TCP_RST 0x04
#define VZ_TCP_ACK 0x10

/* Source and destination port, first in both TCP and UDP, network order. */
struct vz_l4_ports {
	__be16 source;
	__be16 dest;
};

/* The ports at off, or NULL past the frame (the rest may be missing). */
VZ_INLINE struct vz_l4_ports *vz_l4_ports(const struct vz_ctx *ctx, __u32 off)
{
	return vz_header(ctx, off, sizeof(struct vz_l4_ports));
}

VZ_INLINE __u8 vz_tcp_flags(const vz_tcphdr *tcp)
{
	return ((const __u8 *)tcp)[13];
}

/* What the ports and flags of a packet are. */
struct vz_l4 {
	__be16 sport;
	__be16 dport;
	__u8 tcp_flags; /* TCP only */
	__u8 has_ports; /* a TCP or UDP header was there: the above are valid */
};

/*
 * The TCP or UDP header at off of an unfragmented packet or a first
 * fragment, whose IP header(s) say len bytes follow. It must be there
 * whole (20 bytes of TCP, 8 of UDP: RFC 1858's tiny fragments are
 * malformed): -1 when it is not. Any other protocol: 0, has_ports 0.
 */
VZ_INLINE int vz_parse_l4(const struct vz_ctx *ctx, __u8 proto, __u32 off,
			  __u32 len, struct vz_l4 *out)
{
	vz_tcphdr *tcp;
	vz_udphdr *udp;

	/* every field on every path: callers read the ports of any protocol */
	if (proto == IPPROTO_TCP) {
		tcp = vz_header(ctx, off, sizeof(*tcp));
		if (!tcp || len < sizeof(*tcp))
			return -1;
		out->sport = tcp->source;
		out->dport = tcp->dest;
		out->tcp_flags = vz_tcp_flags(tcp);
		out->has_ports = 1;
	} else if (proto == IPPROTO_UDP) {
		udp = vz_header(ctx, off, sizeof(*udp));
		if (!udp || len < sizeof(*udp))
			return -1;
		out->sport = udp->source;
		out->dport = udp->dest;
		out->tcp_flags = 0;
		out->has_ports = 1;
	} else {
		out->sport = 0;
		out->dport = 0;
		out->tcp_flags = 0;
		out->has_ports = 0;
	}
	return 0;
}

/*
 * The UDP header at off of a datagram whose IP header(s) say len bytes
 * follow, if its own length is sane: at least the header, at most len.
 * Bytes past it are not the datagram's (the UDP options draft puts
 * options there), so a shorter length is fine, a longer one a lie. NULL
 * when the header is cut short or its length is not sane.
 */
VZ_INLINE vz_udphdr *vz_udp(const struct vz_ctx *ctx, __u32 off, __u32 len)
{
	vz_udphdr *udp = vz_header(ctx, off, sizeof(*udp));
	__u32 ulen;

	if (!udp || len < sizeof(*udp))
		return 0;
	ulen = bpf_ntohs(udp->len);
	if (ulen < sizeof(*udp) || ulen > len)
		return 0;
	return udp;
}

#endif /* VELOZ_PROTO_L4_H */
