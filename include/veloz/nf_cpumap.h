/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The cpumap build of an NF: NAME.cpumap.bpf.o, compiled with
 * `-DVZ_CPUMAP -include veloz/nf_cpumap.h` (nf/meson.build), runs behind
 * the dispatch stage as a cpumap program (src/dispatch/xdp_stage.h). The kernel
 * drops XDP_TX there, so TX goes back out of the ingress interface by
 * redirect instead, still counted as TX. Everything else is nf.h's, which
 * this includes first; the NF's own #include of it is then a no-op, and its
 * VZ_NF is the one below. A header of its own, so the default build's
 * objects stay byte for byte what they were.
 */
#ifndef VELOZ_NF_CPUMAP_H
#define VELOZ_NF_CPUMAP_H

#include <veloz/nf.h>

#ifdef VZ_BUILD_BPF
VZ_INLINE int vz__finish_cpumap(struct vz_ctx *ctx, int verdict,
				__u64 frame_len)
{
	int action = vz__finish(ctx, verdict, frame_len);

	if (action == VZ_TX)
		return (int)bpf_redirect(ctx->xdp->ingress_ifindex, 0);
	return action;
}

#undef VZ_NF
#define VZ_NF(nf_name)                                                 \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx);            \
	SEC("xdp.frags") int vz_xdp_##nf_name(struct xdp_md *xdp)      \
	{                                                              \
		struct vz_ctx ctx = { .xdp = xdp };                    \
		__u64 frame_len = vz__frame_len(&ctx);                 \
		return vz__finish_cpumap(&ctx, vz__nf_##nf_name(&ctx), \
					 frame_len);                   \
	}                                                              \
	char vz_license[] SEC("license") = "Dual BSD/GPL";             \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx              \
				       __attribute__((unused)))
#endif

#endif
