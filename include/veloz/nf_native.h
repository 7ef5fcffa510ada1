/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The native build's packet context and NF descriptor: what a userspace
 * worker or the control plane needs to drive an NF's NAME.so. NFs include
 * nf.h, which includes this; the control plane includes only this.
 */
#ifndef VELOZ_NF_NATIVE_H
#define VELOZ_NF_NATIVE_H

#include <linux/types.h>
#include <veloz/maps.h>

struct vz_ctx {
	__u8 *data; /* first byte of the frame */
	__u8 *data_end; /* end of the linear part */
	__u8 *data_hard_start; /* start of the headroom */
	__u32 frags_len; /* bytes after data_end, not visible to the NF */
	__u32 ingress_port;
	__u32 redirect_port;
};

/* 2: struct vz_map grew the LPM fast path's fields
 * 3: ...and the trie's first level (lpm_root, lpm_root_shift, lpm_bits)
 * 4: ...and the IPv4 lookup's (lpm4_root, lpm4_mask)
 * 5: LPM leaves count value bytes (lpm.h), and lpm4_mask is gone */
#define VZ_NF_ABI 5

struct vz_nf_desc {
	__u32 abi; /* VZ_NF_ABI */
	const char *name;
	int (*run)(struct vz_ctx *ctx); /* body + counting: the final action */
	struct vz_map *const *maps; /* every map of the NF */
	struct vz_map *const *maps_end;
};

#endif
