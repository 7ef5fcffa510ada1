/* SPDX-License-Identifier: BSD-2-Clause */
/* The generator's second way out: an AF_XDP socket's TX ring. */
#ifndef VZ_GEN_XSK_TX_H
#define VZ_GEN_XSK_TX_H

#include <linux/types.h>
#include <signal.h>

struct vz_xsk_tx {
	const char *ifname;
	__u32 queue;
	const __u8 *frame; /* the template, `size` bytes */
	__u32 size;
	__u16 l4_off, payload_off, csum_off; /* as in struct vz_gen_config */
	__u32 flows, base_port;
	__u64 rate; /* pps, 0 = as fast as possible */
	__u64 count; /* 0 = until duration */
	double duration;
	volatile sig_atomic_t *stop;
};

/*
 * Send through an AF_XDP socket on the interface's queue. Returns the
 * frames the kernel reported transmitted (completions); *elapsed is the
 * sending time; *err a negative errno, with the reason said on stderr.
 */
__u64 vz_xsk_tx_send(const struct vz_xsk_tx *t, double *elapsed, int *err);

#endif
