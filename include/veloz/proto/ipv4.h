/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * IPv4: the header at an offset, checked (vz_ipv4) or not (vz_ipv4_header),
 * its length fields and fragment bits. Version and IHL are read from the
 * first byte by hand: bitfield order is the compiler's.
 *
 * What a malformed header costs a packet is each program's policy (ddos and
 * lb drop it, the router drops it, the dispatch stage hashes it as non-IP),
 * so these say what is wrong and leave the verdict to the caller.
 */
#ifndef VELOZ_PROTO_IPV4_H
#define VELOZ_PROTO_IPV4_H

#include <linux/in.h>
#include <linux/ip.h>
#include <veloz/proto/ctx.h>

#ifdef VZ_BUILD_BPF
typedef struct iphdr vz_iphdr;
#else
typedef struct iphdr vz_iphdr __attribute__((aligned(2))); /* see ctx.h */
#endif

/* frag_off's bits, host order */
#define VZ_IP_DF 0x4000
#define VZ_IP_MF 0x2000
#define VZ_IP_OFFSET 0x1fff /* in 8-byte units */

VZ_INLINE __u32 vz_ipv4_version(const vz_iphdr *iph)
{
	return *(const __u8 *)iph >> 4;
}

/* The header's length in bytes, options included (IHL * 4). */
VZ_INLINE __u32 vz_ipv4_hlen(const vz_iphdr *iph)
{
	return (__u32)(*(const __u8 *)iph & 0xf) * 4;
}

/* The fixed header at off whatever it holds, or NULL past the frame. */
VZ_INLINE vz_iphdr *vz_ipv4_header(const struct vz_ctx *ctx, __u32 off)
{
	return vz_header(ctx, off, sizeof(vz_iphdr));
}

/* The header at off if it is one (version 4, IHL >= 5), else NULL. */
VZ_INLINE vz_iphdr *vz_ipv4(const struct vz_ctx *ctx, __u32 off)
{
	vz_iphdr *iph = vz_ipv4_header(ctx, off);

	if (!iph || vz_ipv4_version(iph) != 4 ||
	    vz_ipv4_hlen(iph) < sizeof(*iph))
		return 0;
	return iph;
}

/*
 * Is the total length sane: at least the header, at most room (the bytes
 * the frame holds from the header on, fragments included)?
 */
VZ_INLINE int vz_ipv4_len_ok(const vz_iphdr *iph, __u64 room)
{
	__u32 tot = bpf_ntohs(iph->tot_len);

	return tot >= vz_ipv4_hlen(iph) && tot <= room;
}

/* Offset of a fragment, in 8-byte units; 0: unfragmented or the first. */
VZ_INLINE __u32 vz_ipv4_frag_offset(const vz_iphdr *iph)
{
	return bpf_ntohs(iph->frag_off) & VZ_IP_OFFSET;
}

/* More fragments follow this one (MF). */
VZ_INLINE int vz_ipv4_frag_more(const vz_iphdr *iph)
{
	return (iph->frag_off & bpf_htons(VZ_IP_MF)) != 0;
}

/* Any fragment, the first (MF set) included. */
VZ_INLINE int vz_ipv4_is_fragment(const vz_iphdr *iph)
{
	return (iph->frag_off & bpf_htons(VZ_IP_MF | VZ_IP_OFFSET)) != 0;
}

#endif /* VELOZ_PROTO_IPV4_H */
