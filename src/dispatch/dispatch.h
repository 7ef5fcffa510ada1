/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The dispatch stage's policy: which worker gets a frame, from its flow's
 * RSS hash. One dispatcher calls it (it takes no locks); the userspace
 * runtime (src/afxdp) and the simulator (src/dispatch/sim) run this same code.
 *
 *   rss-mod        hash % active workers (Shenango). Changing the number of
 *                  workers moves most flows at once, and a flow whose
 *                  frames are still queued on its old worker is reordered.
 *   flow-affinity  a flow table keeps each flow on its worker (Calisto); a
 *                  new flow goes to the least-loaded active worker. A flow
 *                  on a worker that was parked moves only once none of its
 *                  frames is in flight, so no frame overtakes another.
 *   buckets        the hash space in VZ_DISPATCH_BUCKETS buckets, each owned
 *                  by a worker (RSS++): every rebalance period the busiest
 *                  worker hands the fewest buckets that even the load to
 *                  the idlest. Constant state whatever the number of flows,
 *                  and it corrects imbalance that flow-affinity, which
 *                  places a flow once, keeps for the flow's life. A bucket
 *                  moves when none of its frames is in flight, or, on an
 *                  overloaded worker whose queue never empties of them,
 *                  after hold_ns anyway: a forced move, which can reorder
 *                  (counted, and measured).
 *
 * Every policy tracks flows the same way to measure what they do: frames in
 * flight per worker (the load), a ticket per frame within its flow, and at
 * completion whether a frame finished behind a later one of its flow
 * (reordered).
 */
#ifndef VZ_RUNTIME_DISPATCH_H
#define VZ_RUNTIME_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define VZ_DISPATCH_MAX_WORKERS 64
#define VZ_DISPATCH_BUCKETS 512

enum vz_dispatch_policy {
	VZ_DISPATCH_RSS_MOD,
	VZ_DISPATCH_FLOW_AFFINITY,
	VZ_DISPATCH_BUCKETS_POLICY,
};

struct vz_dispatch_config {
	enum vz_dispatch_policy policy;
	unsigned int workers; /* at most this many active, 1..64 */
	unsigned int flow_slots; /* flow table, a power of two */
	__u64 idle_ns; /* a flow idle this long is forgotten */
	__u64 rebalance_ns; /* buckets: how often to even the load */
	double imbalance; /* buckets: act when max load > (1 + this) * mean */
	__u64 hold_ns; /* buckets: longest wait for a bucket to drain */
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

/* Names as the command line spells them; -1 for an unknown one. */
int vz_dispatch_policy_parse(const char *name);
const char *vz_dispatch_policy_name(enum vz_dispatch_policy policy);

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

void vz_dispatch_get_stats(const struct vz_dispatch *d,
			   struct vz_dispatch_stats *s);

#endif
