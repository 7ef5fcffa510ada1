/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The native dispatch stage: the state behind the policies of policy.h
 * (where their rules are written, once, for this build and the XDP stage's)
 * and the measurements. One dispatcher calls it (it takes no locks); the
 * afxdp and dpdk dispatchers and the simulator (src/dispatch/sim) run this
 * same code.
 *
 * State here: a flow table keyed by the RSS hash (each flow's worker and
 * frames in flight), frames in flight per worker (the load a decision sees),
 * and the buckets, which a rebalance every rebalance_ns evens out (RSS++:
 * the busiest worker hands the fewest buckets that even the load to the
 * idlest) unless the active set changed within settle_ns: buckets moved
 * while the allocator is still growing or shrinking would only move back.
 * Forced moves are bounded by max_forced per rebalance period.
 *
 * Every policy tracks flows the same way to measure what they do: frames in
 * flight per worker (the load), a ticket per frame within its flow, and at
 * completion whether a frame finished behind a later one of its flow
 * (reordered).
 */
#ifndef VZ_DISPATCH_DISPATCH_H
#define VZ_DISPATCH_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "dispatch/policy.h"

struct vz_dispatch_config {
	enum vz_dispatch_policy policy;
	unsigned int workers; /* at most this many active, 1..64 */
	unsigned int flow_slots; /* flow table, a power of two */
	__u64 idle_ns; /* a flow idle this long is forgotten */
	__u64 rebalance_ns; /* the period: buckets even the load, forced
			     * moves get a new budget */
	double imbalance; /* buckets: act when max load > (1 + this) * mean */
	__u64 hold_ns; /* buckets: longest wait for a bucket to drain */
	__u64 settle_ns; /* buckets: no rebalance this soon after a change
			  * of active workers */
	unsigned int max_forced; /* forced moves per rebalance period */
	unsigned int migrate_gap; /* flow-affinity: see policy.h */
	unsigned int force_gap; /* see policy.h; 0: never force a flow */
	unsigned int choices; /* see policy.h: 0 (scan all) or 2 */
};

struct vz_dispatch_stats {
	__u64 frames;
	__u64 reordered; /* completed behind a later frame of their flow */
	__u64 flows_new;
	__u64 flows_moved; /* to another worker while known */
	__u64 flows_aged; /* forgotten after idle_ns */
	__u64 table_full; /* frames of a flow the table had no room for */
	__u64 buckets_moved;
	__u64 buckets_forced; /* of those, moved with frames in flight */
	__u64 flows_forced; /* busy flows moved off a stuck worker */
	__u64 compared; /* workers compared to find the least loaded */
	__u64 rebalances;
	__u64 frames_per_worker[VZ_DISPATCH_MAX_WORKERS];
	__u32 in_flight[VZ_DISPATCH_MAX_WORKERS];
	unsigned int active;
	unsigned int flows; /* entries in the flow table */
};

/* What the dispatcher hands back at completion, with the worker. */
struct vz_dispatch_ticket {
	__u32 hash;
	__u32 seq; /* the frame's place in its flow */
	__u32 bucket;
	__u32 flow; /* flow table slot + 1; 0: not tracked (table full) */
};

struct vz_dispatch;

/* Sensible defaults for `policy` on `workers` workers. */
void vz_dispatch_config_default(struct vz_dispatch_config *cfg,
				enum vz_dispatch_policy policy,
				unsigned int workers);

/* NULL and one line on stderr for a bad config or no memory. */
struct vz_dispatch *vz_dispatch_new(const struct vz_dispatch_config *cfg);
void vz_dispatch_free(struct vz_dispatch *d);

/*
 * The worker for a frame of the flow with `hash`, arriving at `now_ns`;
 * fills `t`, which goes back to vz_dispatch_done() when the worker is done.
 */
unsigned int vz_dispatch_pick(struct vz_dispatch *d, __u32 hash, __u64 now_ns,
			      struct vz_dispatch_ticket *t);

/* Worker `worker` finished the frame of ticket `t`. */
void vz_dispatch_done(struct vz_dispatch *d, unsigned int worker,
		      const struct vz_dispatch_ticket *t);

/*
 * The frame of ticket `t` never reached worker `worker` (its queue was
 * full): forget it without counting it as completed.
 */
void vz_dispatch_cancel(struct vz_dispatch *d, unsigned int worker,
			const struct vz_dispatch_ticket *t);

/*
 * Workers 0..n-1 are active from now on (1 <= n <= cfg.workers). Workers
 * above n get no new flows; they finish what they hold.
 */
void vz_dispatch_set_active(struct vz_dispatch *d, unsigned int n);
unsigned int vz_dispatch_active(const struct vz_dispatch *d);

/* Frames queued or in service on `worker`. */
__u32 vz_dispatch_in_flight(const struct vz_dispatch *d, unsigned int worker);

/*
 * Periodic work, called often (each dispatcher loop, each simulated
 * microsecond): buckets rebalancing; ageing a slice of the flow table.
 */
void vz_dispatch_tick(struct vz_dispatch *d, __u64 now_ns);

/*
 * Calisto's future work: fill the flow table before traffic, so first
 * frames cost no insert; the flows are spread evenly over active workers.
 */
int vz_dispatch_prepopulate(struct vz_dispatch *d, const __u32 *hashes,
			    size_t n, __u64 now_ns);

/*
 * Hand every decision policy.h takes, with its inputs, to fn (NULL: stop):
 * the trace the BPF-vs-native differential test replays.
 */
typedef void vz_dispatch_recorder_fn(void *arg,
				     const struct vz_policy_record *rec);
void vz_dispatch_record(struct vz_dispatch *d, vz_dispatch_recorder_fn *fn,
			void *arg);

void vz_dispatch_get_stats(const struct vz_dispatch *d,
			   struct vz_dispatch_stats *s);

#endif
