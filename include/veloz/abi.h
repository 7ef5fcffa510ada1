/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Structures and constants shared by NFs (BPF and native builds), the C
 * control plane and the Python lab. Fixed-width types only, so the BPF and
 * the x86-64 layouts are identical; Python reads field names and offsets of
 * NF configs from the BPF object's BTF rather than repeating them.
 */
#ifndef VELOZ_ABI_H
#define VELOZ_ABI_H

#include <linux/types.h>

/* Verdicts. The values are the XDP actions, so the BPF build maps them 1:1. */
enum vz_verdict {
	VZ_ABORTED = 0, /* NF error or failed redirect: dropped, counted */
	VZ_DROP = 1,
	VZ_PASS = 2, /* hand the packet to the host's kernel stack */
	VZ_TX = 3, /* send back out of the ingress port */
	VZ_REDIRECT_VERDICT =
		4, /* out of ctx's redirect port, see VZ_REDIRECT() */
	VZ_VERDICT_COUNT = 5,
};

/* Per-verdict counters, one per CPU (BPF) or worker (native). */
struct vz_stat {
	__u64 packets;
	__u64 bytes;
};

/* Ports are a run's interfaces, numbered in the order they were given. */
#define VZ_MAX_PORTS 64

/*
 * Frame geometry, mirroring the kernel's XDP buffers so that both builds see
 * the same bytes: 256 bytes of headroom (XDP_PACKET_HEADROOM), of which the
 * first VZ_FRAME_RESERVE hold the kernel's struct xdp_frame and cannot be
 * claimed by vz_adjust_head(); and at most VZ_LINEAR_MAX bytes in the linear
 * part of a frame (one 4 KiB page minus headroom and skb_shared_info), the
 * rest being fragments that an NF does not see through vz_header().
 */
#define VZ_HEADROOM 256
#define VZ_FRAME_RESERVE 40
#define VZ_LINEAR_MAX 3520
#define VZ_FRAME_MAX 9216

/* Largest offset and length vz_header() accepts: keeps the verifier happy. */
#define VZ_HEADER_OFF_MAX 4096
#define VZ_HEADER_LEN_MAX 512

/* ---- NF configurations --------------------------------------------------- */

/* nf/redirect.c: every packet goes out of this port. */
struct vz_redirect_config {
	__u32 port;
};

/* nf/memaccess.c: the eBPF cost study's synthetic load. */
#define VZ_MEMACCESS_MAX 4096
#define VZ_MEMACCESS_SLOTS 4096
struct vz_memaccess_config {
	__u32 accesses; /* reads+writes of the table per packet */
};

/* 16 KiB: fits a per-CPU map value and the L1 cache of any server core. */
struct vz_memaccess_table {
	__u32 slot[VZ_MEMACCESS_SLOTS];
};

#endif /* VELOZ_ABI_H */
