/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Shared by the generator's XDP program and its userspace driver. */
#ifndef VZ_GEN_H
#define VZ_GEN_H

#include <linux/types.h>

/* Template: Ethernet + IPv4 (no options) + UDP, then the payload. */
#define VZ_GEN_UDP_OFF (14 + 20)
#define VZ_GEN_PAYLOAD_OFF (VZ_GEN_UDP_OFF + 8)
#define VZ_GEN_MIN_SIZE 60 /* without FCS; the payload must fit */

struct vz_gen_config {
	__u32 ifindex; /* frames are generated only for this one */
	__u32 flows; /* UDP source ports base_port .. +flows-1 */
	__u32 base_port;
	__u32 pad;
	__u64 seq_base; /* so several runs do not repeat numbers */
	/*
	 * The template's headers, written into every frame: live frames come
	 * from a page pool whose pages return after whoever received them
	 * is done, and a receiver in the kernel may have rewritten them in
	 * place (IP forwarding sets new MACs and lowers the TTL).
	 */
	__u8 headers[VZ_GEN_PAYLOAD_OFF];
} __attribute__((aligned(8)));

struct vz_gen_payload {
	__u64 seq;
	__u64 tx_ns; /* CLOCK_MONOTONIC at transmit */
} __attribute__((packed));

#endif
