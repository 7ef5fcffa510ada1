/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What a capture carries from where the NF runs to `veloz dump`: the XDP
 * dump build's perf events (nf_dump.h) and the userspace backends' capture
 * records (src/ctl/capture.h). Fixed-width, one definition.
 */
#ifndef VELOZ_DUMP_ABI_H
#define VELOZ_DUMP_ABI_H

#include <linux/types.h>

/* Bytes kept of a frame at most: the largest frame a port delivers. */
#define VZ_DUMP_SNAP_MAX 9216u

enum vz_dump_kind {
	VZ_DUMP_FRAME =
		1, /* len, caplen, ifindex, queue, ts_ns; bytes follow */
	VZ_DUMP_VERDICT = 2, /* action, port */
	VZ_DUMP_RECORD = 3, /* both at once (userspace backends) */
};

struct vz_dump_event {
	__u32 kind;
	__s32 action; /* enum vz_verdict's values: the final action */
	__u32 len; /* the frame's length, fragments included */
	__u32 caplen; /* bytes that follow */
	__u32 ifindex; /* XDP: the ingress ifindex; userspace: the port */
	__u32 queue; /* the receive queue (XDP), the worker (userspace) */
	__u32 port; /* REDIRECT: the output port */
	__u32 pad;
	__u64 ts_ns; /* CLOCK_MONOTONIC */
};

struct vz_dump_conf {
	__u32 snaplen;
};

#endif
