/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The core allocator for the XDP dispatch stage (vz-xdp --dispatch
 * --alloc): the runner checks every VZ_XDP_ALLOC_PERIOD_NS how long frames
 * wait in each active CPU's cpumap queue and lets the userspace allocator's
 * decision (core_alloc.c, vz_core_alloc_decide) grow or shrink the active
 * CPUs.
 *
 * What it measures: two counts per CPU c that exist anyway, frames the
 * stage sent to c (dsp_cpu_pkts, counted by xdp_stage.bpf.c before the
 * redirect) and frames the NF ran on c (the NF's own per-CPU verdict
 * counters: behind the stage the NF runs only as the cpumap program, and
 * that runs on the queue's CPU). Their difference is c's backlog. Kept
 * with the time of each check, the counts also date the oldest waiting
 * frame, as Shenango's IOKernel does: frame number dequeued + 1 arrived
 * before the first check that had counted it as sent, so it has waited at
 * least since then. Why counts rather than the alternatives:
 *   - timestamps per frame would need the stage to write metadata and every
 *     NF's cpumap wrapper to read it: a cost on every frame and a change to
 *     every NF's build, for a resolution the check period cannot use;
 *   - the xdp:xdp_cpumap_kthread / xdp_cpumap_enqueue tracepoints report
 *     per bulk what was processed and dropped, but need a program of their
 *     own attached, and say nothing the counts do not, except drops.
 * Drops are what counts miss: a frame the cpumap could not queue (its ring
 * full) is counted sent and never run. So a CPU whose run count has not
 * moved for VZ_XDP_ALLOC_SETTLE_NS while frames sent before then are still
 * missing has dropped them: they are written off (and taken back if they
 * are run after all, should the CPU have been starved instead).
 *
 * Pure arithmetic on the counts it is given: tests/unit drives it without
 * BPF.
 */
#ifndef VZ_DISPATCH_XDP_ALLOC_H
#define VZ_DISPATCH_XDP_ALLOC_H

#include <stdbool.h>
#include <linux/types.h>

#include "dispatch/core_alloc.h"

/* Each check costs a map lookup per CPU and verdict: 1 ms, not 5 us. */
#define VZ_XDP_ALLOC_PERIOD_NS 1000000ull
#define VZ_XDP_ALLOC_HISTORY 64 /* checks remembered */
#define VZ_XDP_ALLOC_SETTLE_NS 50000000ull /* 50 ms without progress */
#define VZ_XDP_ALLOC_MAX_CPUS 64

struct vz_xdp_alloc_sample {
	__u64 t;
	__u64 sent[VZ_XDP_ALLOC_MAX_CPUS];
};

struct vz_xdp_alloc {
	struct vz_core_alloc core;
	unsigned int workers;
	unsigned int active;
	__u64 lost[VZ_XDP_ALLOC_MAX_CPUS]; /* written off as dropped */
	__u64 run[VZ_XDP_ALLOC_MAX_CPUS]; /* at the last check */
	__u64 run_moved_at[VZ_XDP_ALLOC_MAX_CPUS];
	unsigned int nsamples, head; /* samples[head] is the newest */
	struct vz_xdp_alloc_sample samples[VZ_XDP_ALLOC_HISTORY];
	__u64 start_ns, last_ns, active_ns; /* for the mean active CPUs */
};

/* 0, or -1 and one line on stderr (workers out of 1..64). */
int vz_xdp_alloc_init(struct vz_xdp_alloc *a, unsigned int workers,
		      unsigned int active, __u64 now_ns);

/*
 * One check at now_ns with each CPU's counts since the start: sent[c] by
 * the stage, run[c] by the NF. Returns the active CPUs from now on
 * (0..n-1); the caller applies a change.
 */
unsigned int vz_xdp_alloc_check(struct vz_xdp_alloc *a, __u64 now_ns,
				const __u64 *sent, const __u64 *run);

/* Mean active CPUs since the start. */
double vz_xdp_alloc_mean_active(const struct vz_xdp_alloc *a);

/* Frames written off as dropped by the cpumap, on all CPUs. */
__u64 vz_xdp_alloc_written_off(const struct vz_xdp_alloc *a);

#endif
