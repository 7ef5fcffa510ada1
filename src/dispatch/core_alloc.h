/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The core allocator: grows and shrinks the dispatcher's active workers with
 * queueing delay, as Shenango's IOKernel does every 5 us. A frame that has
 * waited in an active worker's queue longer than grow_delay means the
 * workers are behind: one more becomes active. A worker that has had
 * nothing to do for park_idle means there is a worker too many: the
 * highest-numbered is parked (it finishes what it holds, then sleeps).
 * Called by the userspace dispatchers (afxdp, dpdk), the XDP stage's
 * runner (src/dispatch/xdp_alloc.c) and the simulator (src/dispatch/sim).
 */
#ifndef VZ_DISPATCH_CORE_ALLOC_H
#define VZ_DISPATCH_CORE_ALLOC_H

#include <linux/types.h>

#include "dispatch/dispatch.h"

struct vz_core_alloc_config {
	unsigned int min_workers, max_workers;
	__u64 interval_ns; /* between checks */
	__u64 grow_delay_ns; /* queueing delay that adds a worker */
	__u64 park_idle_ns; /* a worker idle this long: one fewer */
	/* hysteresis: no worker is parked this soon after one was added, so
	 * a burst does not add and remove workers in turn (each change moves
	 * flows and buckets, and wakes a core) */
	__u64 shrink_holdoff_ns;
};

struct vz_core_alloc_stats {
	__u64 checks;
	__u64 grows, shrinks; /* reallocations: their sum */
};

struct vz_core_alloc {
	struct vz_core_alloc_config cfg;
	__u64 next_check;
	__u64 grown_at; /* the last grow */
	__u64 busy_at[VZ_DISPATCH_MAX_WORKERS]; /* last seen with work */
	struct vz_core_alloc_stats stats;
};

void vz_core_alloc_config_default(struct vz_core_alloc_config *cfg,
				  unsigned int max_workers);

/* 0, or -1 and one line on stderr for a config that cannot work. */
int vz_core_alloc_init(struct vz_core_alloc *a,
		       const struct vz_core_alloc_config *cfg, __u64 now_ns);

/*
 * Every call that is a check's time looks at each active worker:
 * oldest_enqueue_ns[w] is when the oldest frame waiting in its queue (not
 * in service) was queued, 0 when none waits. Changes the dispatcher's
 * active workers at most by one; returns their number.
 */
unsigned int vz_core_alloc_tick(struct vz_core_alloc *a, struct vz_dispatch *d,
				__u64 now_ns, const __u64 *oldest_enqueue_ns);

/*
 * The same decision for a dispatcher whose policy is not a struct
 * vz_dispatch (the XDP stage's runs in BPF): n workers active, in_flight[w]
 * frames queued or in service on each (only zero or not matters). Returns
 * the number of active workers from now on; the caller applies it.
 */
unsigned int vz_core_alloc_decide(struct vz_core_alloc *a, unsigned int n,
				  __u64 now_ns, const __u32 *in_flight,
				  const __u64 *oldest_enqueue_ns);

#endif
