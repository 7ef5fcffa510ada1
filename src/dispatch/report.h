/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the userspace dispatch stage (dispatcher.c, on afxdp and dpdk)
 * reports, once for both: the dispatcher publishes a snapshot of the
 * policy's and the allocator's counters now and then (never waiting on the
 * counting thread), and the counting thread prints it after each counter
 * line, as `dispatch` and, last, `dispatch_summary` JSON events. Same
 * fields on every backend, so `veloz run --dispatch` reads the same
 * whichever runs it.
 */
#ifndef VZ_DISPATCH_REPORT_H
#define VZ_DISPATCH_REPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"

struct vz_dispatch_report {
	enum vz_dispatch_policy policy;
	unsigned int nworkers;
	bool alloc; /* the core allocator sets the active workers */
	pthread_mutex_t lock;
	/* The dispatcher's last snapshot, under `lock`. */
	struct vz_dispatch_stats snap;
	struct vz_core_alloc_stats alloc_snap;
	__u64 ring_full; /* frames dropped: their worker's queue was full */
	__u64 active_ns; /* integral of active workers over time */
	__u64 ns; /* since the dispatcher started */
	/* The counting thread's: the previous report, for per-interval. */
	struct vz_dispatch_stats last;
	__u64 last_active_ns, last_ns;
};

void vz_dispatch_report_init(struct vz_dispatch_report *r,
			     enum vz_dispatch_policy policy,
			     unsigned int nworkers);
void vz_dispatch_report_destroy(struct vz_dispatch_report *r);

/*
 * The dispatcher's snapshot. Skipped when the counting thread holds the
 * lock, except the `last` one, which waits for it.
 */
void vz_dispatch_report_publish(struct vz_dispatch_report *r,
				const struct vz_dispatch *policy,
				const struct vz_core_alloc *alloc,
				__u64 ring_full, __u64 active_ns, __u64 ns,
				bool last);

/* Frames lost at full worker queues, as last published. */
__u64 vz_dispatch_report_ring_full(struct vz_dispatch_report *r);

/*
 * The last snapshot as a "dispatch" object in a counters line (JSON, with
 * its leading ", "): every count since the start, per worker too, and the
 * frames each worker holds now (in_flight: queued, in service or on the
 * way back), for the control socket's `counters` request and so --metrics
 * and `veloz status`. The same keys as the xdp stage's object where the
 * meaning is the same; the counting thread calls it.
 */
void vz_dispatch_report_json(struct vz_dispatch_report *r, FILE *f);

/* One `dispatch` line (per interval), or the run's `dispatch_summary`. */
void vz_dispatch_report_print(struct vz_dispatch_report *r, bool json, double t,
			      bool summary);

#endif
