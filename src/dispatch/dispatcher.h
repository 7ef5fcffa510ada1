/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a userspace dispatcher thread holds whatever its backend: the
 * policy that places flows, the core allocator that grows and shrinks the
 * active workers, and the counters the counting thread reads through the
 * report. src/afxdp/dispatcher.c and src/dpdk/dispatcher.c embed it and
 * add their own rings and workers.
 */
#ifndef VZ_DISPATCH_DISPATCHER_H
#define VZ_DISPATCH_DISPATCHER_H

#include <stdbool.h>

#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"
#include "dispatch/report.h"

struct vz_dispatcher {
	struct vz_dispatch *policy;
	struct vz_core_alloc alloc;
	unsigned int active; /* the policy's, for workers to read */
	unsigned int nworkers;
	__u64 ring_full; /* frames dropped: their worker's ring was full */
	__u64 active_ns; /* integral of active workers over time */
	__u64 start_ns;
	struct vz_dispatch_report report; /* what the counting thread reads */
	bool dispatcher_done; /* it has stopped: workers empty their rings */
};

/*
 * POLICY over WORKERS, with the core allocator; with ALLOC it starts from
 * one active worker and grows with the load. 0, or -EINVAL.
 */
int vz_dispatcher_init(struct vz_dispatcher *dc, enum vz_dispatch_policy policy,
		       unsigned int workers, bool alloc);

/*
 * One allocator tick, given each active worker's oldest queued job
 * (enqueue time, 0: none). Returns the active count before; dc->active is
 * the new one (stored with release, for the workers): the caller wakes
 * workers [before, dc->active).
 */
unsigned int vz_dispatcher_allocate(struct vz_dispatcher *dc, __u64 now,
				    const __u64 *oldest);

/* The counters, for the counting thread to read (last: the final ones). */
void vz_dispatcher_publish(struct vz_dispatcher *dc, __u64 now, bool last);

#endif
