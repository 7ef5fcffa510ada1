/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * IPv6: the header at an offset, checked (vz_ipv6) or not
 * (vz_ipv6_header), where it ends, its traffic class, the Fragment header,
 * and the walk over extension headers to the upper-layer header
 * (vz_ipv6_skip_ext).
 */
#ifndef VELOZ_PROTO_IPV6_H
#define VELOZ_PROTO_IPV6_H

#include <linux/in.h>
#include <linux/ipv6.h>
#include <veloz/proto/ctx.h>

#ifdef VZ_BUILD_BPF
typedef struct ipv6hdr vz_ipv6hdr;
#else
typedef struct ipv6hdr vz_ipv6hdr __attribute__((aligned(2))); /* ctx.h */
#endif

/* The Fragment header (RFC 8200 4.5); the uapi headers have none. */
struct vz_ipv6_frag {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset in 8-byte units << 3, then 2 reserved bits, M
			  */
	vz_be32 identification;
};

#define VZ_IPV6_FRAG_HLEN 8
/* frag_off's bits, host order */
#define VZ_IPV6_FRAG_MF 0x0001
#define VZ_IPV6_FRAG_OFFSET 0xfff8 /* the offset, in bytes */

VZ_INLINE __u32 vz_ipv6_version(const vz_ipv6hdr *ip6)
{
	return *(const __u8 *)ip6 >> 4;
}

/* Traffic class: the 8 bits after the version. */
VZ_INLINE __u8 vz_ipv6_tclass(const vz_ipv6hdr *ip6)
{
	return (__u8)(bpf_ntohl(*(const vz_be32 *)ip6) >> 20);
}

/* The fixed header at off whatever it holds, or NULL past the frame. */
VZ_INLINE vz_ipv6hdr *vz_ipv6_header(const struct vz_ctx *ctx, __u32 off)
{
	return vz_header(ctx, off, sizeof(vz_ipv6hdr));
}

/* The header at off if it is one (version 6), else NULL. */
VZ_INLINE vz_ipv6hdr *vz_ipv6(const struct vz_ctx *ctx, __u32 off)
{
	vz_ipv6hdr *ip6 = vz_ipv6_header(ctx, off);

	if (!ip6 || vz_ipv6_version(ip6) != 6)
		return 0;
	return ip6;
}

/*
 * Where the packet whose header is at off ends: off + 40 + payload length.
 * Past the frame's length (fragments included) means it is cut short.
 */
VZ_INLINE __u32 vz_ipv6_end(const vz_ipv6hdr *ip6, __u32 off)
{
	return off + sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
}

/* A fragment's offset in 8-byte units; 0: the first (or an atomic one). */
VZ_INLINE __u32 vz_ipv6_frag_offset(const struct vz_ipv6_frag *fh)
{
	return bpf_ntohs(fh->frag_off) >> 3;
}

/* More fragments follow this one (M). */
VZ_INLINE int vz_ipv6_frag_more(const struct vz_ipv6_frag *fh)
{
	return (fh->frag_off & bpf_htons(VZ_IPV6_FRAG_MF)) != 0;
}

/* Where the extension headers lead. */
struct vz_ipv6_l4 {
	__u32 off; /* the upper-layer header, or a fragment's data */
	__u16 frag_offset; /* non-zero: a non-first fragment, in 8-byte units */
	__u8 proto; /* the upper-layer protocol */
};

/*
 * Walk the extension headers (hop-by-hop, routing, destination options,
 * AH, fragment) that follow a header whose next header is nexthdr, from
 * off, within the packet's end (vz_ipv6_end()).
 * Stops at the first other protocol, or at a non-first fragment, whose
 * bytes are data. 0 with out filled in; -1 when a header is cut short,
 * runs past end, or more than max of them come in a row, so that no chain
 * can hide the upper-layer header from a filter.
 */
VZ_INLINE int vz_ipv6_skip_ext(const struct vz_ctx *ctx, __u8 nexthdr,
			       __u32 off, __u32 end, __u32 max,
			       struct vz_ipv6_l4 *out)
{
	struct vz_ipv6_frag *fh;
	__u32 i;
	__u8 *ext;

	out->frag_offset = 0;
	for (i = 0; i <= max; i++) {
		switch (nexthdr) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
			ext = vz_header(ctx, off, 2);
			if (!ext)
				return -1;
			nexthdr = ext[0];
			off += ((__u32)ext[1] + 1) * 8; /* 8-octet units */
			break;
		case IPPROTO_AH:
			ext = vz_header(ctx, off, 2);
			if (!ext)
				return -1;
			nexthdr = ext[0];
			off += ((__u32)ext[1] + 2) * 4; /* RFC 4302 */
			break;
		case IPPROTO_FRAGMENT:
			fh = vz_header(ctx, off, sizeof(*fh));
			if (!fh)
				return -1;
			nexthdr = fh->nexthdr;
			off += sizeof(*fh);
			out->frag_offset = (__u16)vz_ipv6_frag_offset(fh);
			break;
		default:
			/* every earlier step left off <= end */
			goto found;
		}
		if (off > end)
			return -1;
		if (out->frag_offset)
			goto found; /* a non-first fragment: what follows is
				       data */
	}
	return -1;
found:
	out->off = off;
	out->proto = nexthdr;
	return 0;
}

#endif /* VELOZ_PROTO_IPV6_H */
