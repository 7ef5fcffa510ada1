/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The packet context every parser in veloz/proto/ works on: struct vz_ctx
 * and vz_header(), the one bounds-checked way to reach packet bytes, in
 * both builds (BPF: the comparison the verifier learns packet bounds from;
 * native: a length check that keeps a parser inside the frame).
 *
 * nf.h includes this. BPF programs that are not NFs (the dispatch stage,
 * the AF_XDP steering programs) include the proto headers alone, without
 * nf.h's maps, and wrap their xdp_md:
 *
 *	struct vz_ctx c = { .xdp = xdp };
 */
#ifndef VELOZ_PROTO_CTX_H
#define VELOZ_PROTO_CTX_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <veloz/abi.h>

#if defined(__bpf__)
#define VZ_BUILD_BPF 1
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#define VZ_INLINE static __always_inline
#else
#define VZ_BUILD_NATIVE 1
#include <bpf/bpf_endian.h> /* bpf_htons() and friends work in userspace */
#include <veloz/nf_native.h> /* the native struct vz_ctx */
#define VZ_INLINE static inline __attribute__((always_inline))
#endif

/*
 * A frame starts 4-byte aligned and the IP header follows 14 bytes of
 * Ethernet, so IP, TCP and ICMP headers sit 2 bytes off the alignment their
 * C structs promise, in both builds. BPF and x86 do not mind; C does, and
 * the sanitizers say so: parsers read L3/L4 headers through the vz_ types
 * (proto/ipv4.h, ipv6.h, l4.h), the kernel's structs with the 2-byte
 * alignment frames really give them (DPDK packs its header structs for the
 * same reason). The BPF build keeps the plain structs, so its code is what
 * the kernel's own programs compile to.
 */
#ifdef VZ_BUILD_BPF
typedef __be32 vz_be32;
#else
typedef __be32 vz_be32 __attribute__((aligned(2)));
#endif

#ifdef VZ_BUILD_BPF
struct vz_ctx {
	struct xdp_md *xdp;
	__u32 redirect_port;
};

VZ_INLINE void *vz_data(const struct vz_ctx *ctx)
{
	return (void *)(long)ctx->xdp->data;
}

VZ_INLINE void *vz_data_end(const struct vz_ctx *ctx)
{
	return (void *)(long)ctx->xdp->data_end;
}
#else
VZ_INLINE void *vz_data(const struct vz_ctx *ctx)
{
	return ctx->data;
}

VZ_INLINE void *vz_data_end(const struct vz_ctx *ctx)
{
	return ctx->data_end;
}
#endif

/*
 * A pointer to len bytes at offset off of the packet, or NULL when the
 * packet is shorter. The only way an NF should reach packet bytes: the
 * bounds check is what the verifier wants and what keeps the native build
 * from reading past a frame. The limits on off and len also bound every
 * offset a parser computes from header fields, so the verifier needs no
 * masking of its own.
 */
VZ_INLINE void *vz_header(const struct vz_ctx *ctx, __u32 off, __u32 len)
{
	__u8 *data = vz_data(ctx);
	__u8 *data_end = vz_data_end(ctx);

	if (off > VZ_HEADER_OFF_MAX || len > VZ_HEADER_LEN_MAX)
		return 0;
#ifdef VZ_BUILD_BPF
	/* the comparison the verifier learns packet bounds from */
	if (data + off + len > data_end)
		return 0;
#else
	if ((long)off + len > data_end - data)
		return 0;
#endif
	return data + off;
}

/* Bytes in the linear part of the frame (what vz_header() can reach). */
VZ_INLINE __u32 vz_len(const struct vz_ctx *ctx)
{
	return (__u32)((__u8 *)vz_data_end(ctx) - (__u8 *)vz_data(ctx));
}

#endif /* VELOZ_PROTO_CTX_H */
