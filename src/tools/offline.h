/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One frame at a time through one build of an NF, offline: the kernel's
 * (BPF_PROG_TEST_RUN on the loaded XDP program) or the native one. What
 * `veloz replay` and the differential fuzzer share, so that both compare the
 * builds the same way.
 *
 * Both builds see a frame alike: the first VZ_LINEAR_MAX bytes as the linear
 * part, the rest as fragments (the kernel splits test frames so), in a
 * buffer with VZ_HEADROOM bytes before it. Every port exists.
 */
#ifndef VZ_CLI_OFFLINE_H
#define VZ_CLI_OFFLINE_H

#include <stdbool.h>

#include "ctl/nf.h"

/* Room for any output: a frame may grow by its headroom. */
#define VZ_OFFLINE_OUT_MAX (VZ_HEADROOM + VZ_FRAME_MAX + 64)

struct vz_offline {
	struct vz_nf *nf;
	bool xdp;
	/* xdp */
	int prog_fd;
	int stats_fd;
	int redirects_fd;
	int hold_fd; /* keeps the program in the XDP dispatcher, or -1 */
	int ncpus;
	struct vz_stat *percpu; /* scratch for per-CPU reads */
	struct vz_stat *redirects; /* every port x every CPU, batch-read */
	__u64 redirected[VZ_MAX_PORTS]; /* to tell which port moved */
	/* native */
	__u8 *frame; /* VZ_HEADROOM + VZ_FRAME_MAX */
};

struct vz_offline_result {
	int verdict; /* final action, enum vz_verdict */
	int port; /* redirect port, or -1 */
	__u32 len_out; /* bytes written to out */
};

/*
 * Load (xdp) or prepare (native) the NF; prints the reason on failure.
 * repeat: what vz_offline_time() will be given, 0 if it will not be called.
 * On xdp, more than 1 moves the caller into a network namespace of its
 * own, so that timing does not pay for a kernel update per call.
 */
int vz_offline_open(struct vz_offline *o, struct vz_nf *nf, bool xdp,
		    __u64 repeat);
void vz_offline_close(struct vz_offline *o);

/* One run; 14 <= len <= VZ_FRAME_MAX; out holds VZ_OFFLINE_OUT_MAX. */
int vz_offline_run(struct vz_offline *o, const __u8 *pkt, __u32 len, __u8 *out,
		   struct vz_offline_result *res);

/* Mean ns per run over `repeat` runs of the frame, like the kernel's loop. */
int vz_offline_time(struct vz_offline *o, const __u8 *pkt, __u32 len,
		    __u64 repeat, double *ns);

/* The NF's own per-verdict packet counters, summed over CPUs or workers. */
int vz_offline_counts(struct vz_offline *o, __u64 counted[VZ_VERDICT_COUNT]);

#endif
