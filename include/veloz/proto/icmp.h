/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMP and ICMPv6: both messages begin alike (RFC 792, RFC 4443 2.1), with
 * type, code and checksum, then 4 bytes whose meaning is the type's (an
 * echo's identifier and sequence), so one header serves both. ICMPv6's
 * types are linux/icmpv6.h's; ICMP's are here, as linux/icmp.h pulls in
 * linux/if.h and, with it, the C library's sys/socket.h. So are NDP's
 * (RFC 4861), which the uapi headers leave to the kernel's own.
 */
#ifndef VELOZ_PROTO_ICMP_H
#define VELOZ_PROTO_ICMP_H

#include <linux/icmpv6.h>
#include <veloz/proto/ctx.h>

#define VZ_ICMP_ECHOREPLY 0
#define VZ_ICMP_DEST_UNREACH 3
#define VZ_ICMP_PORT_UNREACH 3 /* the code, under VZ_ICMP_DEST_UNREACH */
#define VZ_ICMP_ECHO 8

#define VZ_ND_NEIGHBOUR_SOLICIT 135
#define VZ_ND_NEIGHBOUR_ADVERT 136

/* An ICMPv6 message may end after its checksum: the rest is the body. */
#define VZ_ICMP6_MIN_LEN 4

/* 16-bit fields only: aligned as frames give it, in both builds. */
struct vz_icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 echo_id; /* echo and echo reply; other types: their own */
	__be16 echo_seq;
};

/* The whole 8-byte header at off, or NULL past the frame. */
VZ_INLINE struct vz_icmphdr *vz_icmp(const struct vz_ctx *ctx, __u32 off)
{
	return vz_header(ctx, off, sizeof(struct vz_icmphdr));
}

/* ICMPv6's first VZ_ICMP6_MIN_LEN bytes at off (type, code, checksum:
 * echo_id and echo_seq may lie past the frame), or NULL. */
VZ_INLINE struct vz_icmphdr *vz_icmp6(const struct vz_ctx *ctx, __u32 off)
{
	return vz_header(ctx, off, VZ_ICMP6_MIN_LEN);
}

#endif /* VELOZ_PROTO_ICMP_H */
