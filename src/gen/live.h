/* SPDX-License-Identifier: BSD-2-Clause */
/* The generator's live-frames transmit loop, on one thread or several. */
#ifndef VZ_GEN_LIVE_H
#define VZ_GEN_LIVE_H

#include <linux/types.h>
#include <signal.h>
#include <stdbool.h>

struct vz_gen_live {
	int prog_fd; /* gen.bpf.o's program, loaded and configured */
	int ifindex; /* out of which the frames leave */
	const __u8 *frame; /* the template, `size` bytes */
	__u32 size;
	__u32 batch; /* live frames per kernel batch */
	__u32 threads; /* 1..VZ_GEN_MAX_THREADS, as the program's config */
	/* the program's vz_gen_seq, to start each call on a fresh clock read
	 * (stamp_every, gen.h); -1 when every frame reads the clock */
	int seq_fd;
	__u64 rate; /* pps in all, 0 = as fast as possible */
	__u64 count; /* frames in all, 0 = until duration */
	double duration;
	bool progress; /* a line a second on stderr */
	volatile sig_atomic_t *stop;
};

/*
 * Send until count or duration (or *stop): `threads` threads, each with
 * its share of the rate and count, pinned to CPUs of their own when there
 * are several. Returns the frames handed to the kernel; *elapsed is the
 * sending time, *err a negative errno (the first thread's to fail).
 */
__u64 vz_gen_live_send(const struct vz_gen_live *l, double *elapsed, int *err);

#endif
