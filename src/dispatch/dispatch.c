// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"

/* Slots looked at for a flow before the table counts as full. */
#define PROBE 32
/* Flow-table slots aged per tick. */
#define AGE_SLICE 64
#define NO_WORKER VZ_POLICY_NONE

struct flow {
	__u32 hash;
	__u32 next_seq; /* the next frame's ticket */
	__u32 done_end; /* highest ticket completed + 1 */
	__u32 in_flight;
	__u64 last_ns;
	__u8 used;
	__u8 worker; /* of its last frame */
};

struct bucket {
	struct vz_policy_bucket p; /* owner, pending: policy.h decides */
	__u32 in_flight;
	__u64 load; /* frames, decayed every rebalance */
};

struct vz_dispatch {
	struct vz_dispatch_config cfg;
	unsigned int active;
	struct flow *flows;
	__u32 mask;
	__u32 age_cursor;
	__u64 now; /* of the last pick or tick */
	__u64 next_rebalance;
	__u64 changed_at; /* of the active set */
	unsigned int forced_left; /* this rebalance period */
	__u32 random; /* xorshift32 state */
	vz_dispatch_recorder_fn *recorder;
	void *recorder_arg;
	/* policy.h's input; view.load[w] is frames in flight on worker w */
	struct vz_policy_view view;
	__u32 flows_on[VZ_DISPATCH_MAX_WORKERS];
	struct bucket buckets[VZ_DISPATCH_NBUCKETS];
	struct vz_dispatch_stats stats;
};

void vz_dispatch_config_default(struct vz_dispatch_config *cfg,
				enum vz_dispatch_policy policy,
				unsigned int workers)
{
	*cfg = (struct vz_dispatch_config){
		.policy = policy,
		.workers = workers,
		.flow_slots = 1u << 16,
		.idle_ns = 1000000000ull, /* 1 s */
		.rebalance_ns = 1000000ull, /* 1 ms */
		.imbalance = 0.02,
		.hold_ns = 200000ull, /* 200 us */
		.settle_ns = 2000000ull, /* two rebalance periods */
		.max_forced =
			1024, /* a period: at most ~1 in 10 frames at 10 Mpps */
		.migrate_gap = 0,
		.force_gap = 256,
		/* scanning 64 workers per frame costs the dispatcher more than
		 * it gains (vz-sim --scan-ns): two choices beyond 8 */
		.choices = workers > 8 ? 2 : 0,
	};
}

struct vz_dispatch *vz_dispatch_new(const struct vz_dispatch_config *cfg)
{
	struct vz_dispatch *d;
	unsigned int b;

	if (cfg->workers < 1 || cfg->workers > VZ_DISPATCH_MAX_WORKERS) {
		fprintf(stderr, "dispatch: workers must be 1..%d, not %u\n",
			VZ_DISPATCH_MAX_WORKERS, cfg->workers);
		return NULL;
	}
	if (cfg->flow_slots < PROBE ||
	    (cfg->flow_slots & (cfg->flow_slots - 1))) {
		fprintf(stderr,
			"dispatch: flow slots must be a power of two >= %d, "
			"not %u\n",
			PROBE, cfg->flow_slots);
		return NULL;
	}
	if ((unsigned int)cfg->policy >= VZ_DISPATCH_POLICIES ||
	    cfg->imbalance < 0) {
		fprintf(stderr, "dispatch: bad policy or imbalance\n");
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d)
		d->flows = calloc(cfg->flow_slots, sizeof(*d->flows));
	if (!d || !d->flows) {
		fprintf(stderr, "dispatch: out of memory\n");
		free(d);
		return NULL;
	}
	d->cfg = *cfg;
	d->mask = cfg->flow_slots - 1;
	d->active = cfg->workers;
	d->view.policy = cfg->policy;
	d->view.nactive = cfg->workers;
	d->view.migrate_gap = cfg->migrate_gap;
	d->view.force_gap = cfg->force_gap;
	d->view.choices = cfg->choices;
	d->random = 0x9e3779b9u;
	d->forced_left = cfg->max_forced;
	d->view.may_force = cfg->max_forced > 0;
	for (b = 0; b < VZ_DISPATCH_NBUCKETS; b++) {
		d->buckets[b].p.owner = b % cfg->workers;
		d->buckets[b].p.pending = NO_WORKER;
	}
	return d;
}

void vz_dispatch_free(struct vz_dispatch *d)
{
	if (d)
		free(d->flows);
	free(d);
}

static bool is_idle(const struct vz_dispatch *d, const struct flow *f,
		    __u64 now)
{
	return !f->in_flight && now - f->last_ns > d->cfg.idle_ns;
}

static void forget(struct vz_dispatch *d, struct flow *f)
{
	if (f->worker != NO_WORKER)
		d->flows_on[f->worker]--;
	f->used = 0;
	d->stats.flows--;
}

/*
 * The flow's slot, or a free one for it (*fresh set), or NULL when the probe
 * window is all busy flows. An idle flow's slot is taken over only when the
 * flow itself is not in the window.
 */
static struct flow *find_flow(struct vz_dispatch *d, __u32 hash, __u64 now,
			      bool *fresh)
{
	struct flow *free_slot = NULL, *stale = NULL, *f;
	unsigned int i;

	*fresh = false;
	for (i = 0; i < PROBE; i++) {
		f = &d->flows[(hash + i) & d->mask];
		if (!f->used) {
			if (!free_slot)
				free_slot = f;
			continue;
		}
		if (f->hash == hash) {
			if (!is_idle(d, f, now))
				return f;
			stale = f; /* the flow again, after a pause */
			break;
		}
		if (!stale && is_idle(d, f, now))
			stale = f;
	}
	if (stale) {
		forget(d, stale);
		d->stats.flows_aged++;
		free_slot = stale;
	}
	if (!free_slot)
		return NULL;
	*free_slot =
		(struct flow){ .hash = hash, .used = 1, .worker = NO_WORKER };
	d->stats.flows++;
	d->stats.flows_new++;
	*fresh = true;
	return free_slot;
}

/* xorshift32: the draws of power-of-two choices, cheap and reproducible. */
static __u32 next_random(struct vz_dispatch *d)
{
	__u32 x = d->random;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return d->random = x;
}

/* A forced move: counted, and paid from this period's budget. */
static void spend_forced(struct vz_dispatch *d, bool flow)
{
	if (flow) {
		d->stats.flows_forced++;
	} else {
		d->stats.buckets_moved++;
		d->stats.buckets_forced++;
	}
	if (!--d->forced_left)
		d->view.may_force = 0;
}

/*
 * The worker for a frame under buckets: the flow table keeps order, so
 * the bucket itself never waits to move (and is never forced to); without
 * an entry (table full) the frame waits for its bucket like the XDP stage.
 */
static unsigned int pick_bucket(struct vz_dispatch *d, struct bucket *b,
				const struct flow *f)
{
	struct vz_policy_record rec;
	__u32 event;
	unsigned int w;

	if (d->recorder)
		rec = (struct vz_policy_record){
			.view = d->view,
			.bucket = b->p,
			.now = d->now,
			.hold_ns = d->cfg.hold_ns,
			.kind = VZ_POLICY_RECORD_BUCKET,
			.worker = f ? f->worker : NO_WORKER,
			.busy = f && f->in_flight,
			.bucket_busy = !f && b->in_flight,
			.may_force = d->forced_left > 0,
		};
	w = vz_policy_bucket(&d->view, &b->p, f ? f->worker : NO_WORKER,
			     f && f->in_flight, !f && b->in_flight, d->now,
			     d->cfg.hold_ns, d->forced_left > 0, &event);
	if (d->recorder) {
		rec.out_worker = w;
		rec.out_event = event;
		rec.out_bucket = b->p;
		d->recorder(d->recorder_arg, &rec);
	}
	if (event == VZ_POLICY_MOVED)
		d->stats.buckets_moved++;
	if (event == VZ_POLICY_FORCED)
		spend_forced(d, f != NULL);
	return w;
}

/* A flow's worker by policy.h, or by hash alone when the table is full. */
static unsigned int pick_flow(struct vz_dispatch *d, struct flow *f, __u32 hash)
{
	struct vz_policy_record rec;
	__u32 event, w, r;

	if (!f) /* untracked: still deterministic per flow */
		return vz_policy_rss_mod(&d->view, hash);
	r = next_random(d);
	if (d->recorder)
		rec = (struct vz_policy_record){
			.view = d->view,
			.kind = VZ_POLICY_RECORD_FLOW,
			.hash = hash,
			.worker = f->worker,
			.busy = f->in_flight != 0,
			.r = r,
		};
	w = vz_policy_pick_flow(&d->view, hash, f->worker, f->in_flight != 0, r,
				&event);
	if (d->recorder) {
		rec.out_worker = w;
		rec.out_event = event;
		d->recorder(d->recorder_arg, &rec);
	}
	if (event == VZ_POLICY_FORCED)
		spend_forced(d, true);
	return w;
}

unsigned int vz_dispatch_pick(struct vz_dispatch *d, __u32 hash, __u64 now_ns,
			      struct vz_dispatch_ticket *t)
{
	struct bucket *b = &d->buckets[hash % VZ_DISPATCH_NBUCKETS];
	unsigned int worker;
	struct flow *f;
	bool fresh;

	d->now = now_ns;
	f = find_flow(d, hash, now_ns, &fresh);
	if (d->cfg.policy == VZ_DISPATCH_BUCKETS)
		worker = pick_bucket(d, b, f);
	else
		worker = pick_flow(d, f, hash);
	*t = (struct vz_dispatch_ticket){ .hash = hash,
					  .bucket =
						  hash % VZ_DISPATCH_NBUCKETS };
	if (f) {
		if (f->worker != worker) {
			if (f->worker != NO_WORKER) {
				d->stats.flows_moved++;
				d->flows_on[f->worker]--;
			}
			d->flows_on[worker]++;
			f->worker = (__u8)worker;
		}
		f->in_flight++;
		f->last_ns = now_ns;
		t->seq = f->next_seq++;
		t->flow = (__u32)(f - d->flows) + 1;
	} else {
		d->stats.table_full++;
	}
	b->in_flight++;
	b->load++;
	d->view.load[worker]++;
	d->stats.frames++;
	d->stats.frames_per_worker[worker]++;
	return worker;
}

void vz_dispatch_done(struct vz_dispatch *d, unsigned int worker,
		      const struct vz_dispatch_ticket *t)
{
	struct flow *f;

	d->view.load[worker]--;
	d->buckets[t->bucket].in_flight--;
	if (!t->flow)
		return;
	f = &d->flows[t->flow - 1];
	f->in_flight--;
	/* Wrap-safe: is this ticket older than one already completed? */
	if ((__s32)(t->seq + 1 - f->done_end) < 0)
		d->stats.reordered++;
	else
		f->done_end = t->seq + 1;
}

void vz_dispatch_cancel(struct vz_dispatch *d, unsigned int worker,
			const struct vz_dispatch_ticket *t)
{
	d->view.load[worker]--;
	d->buckets[t->bucket].in_flight--;
	if (t->flow)
		d->flows[t->flow - 1].in_flight--;
}

/* Where a bucket is going: its pending owner, else its owner. */
static unsigned int destination(const struct bucket *k)
{
	return k->p.pending != NO_WORKER ? k->p.pending : k->p.owner;
}

/*
 * Load of every worker's buckets over the last period, by destination; a
 * bucket counts one frame more than it saw, so buckets with no history yet
 * (a cold start, a new worker) are spread by number.
 */
static void worker_loads(const struct vz_dispatch *d, __u64 *load)
{
	unsigned int b;

	memset(load, 0, sizeof(*load) * VZ_DISPATCH_MAX_WORKERS);
	for (b = 0; b < VZ_DISPATCH_NBUCKETS; b++)
		load[destination(&d->buckets[b])] += d->buckets[b].load + 1;
}

/* Send bucket `k` to worker `to`: policy.h moves it once it is quiescent. */
static void send_bucket(struct vz_dispatch *d, struct bucket *k,
			unsigned int to)
{
	if (k->p.owner == to) {
		k->p.pending = NO_WORKER;
		return;
	}
	if (k->p.pending == NO_WORKER)
		k->p.pending_since = d->now;
	k->p.pending = to;
}

/*
 * One step of RSS++: the busiest worker gives the idlest buckets worth what
 * brings one of them to the mean, largest first, so the fewest buckets
 * move; they move together, as one group. Returns the buckets sent.
 */
static unsigned int rebalance_step(struct vz_dispatch *d)
{
	__u64 load[VZ_DISPATCH_MAX_WORKERS], total = 0, mean, gap;
	unsigned int w, hi = 0, lo = 0, b, moved = 0;

	worker_loads(d, load);
	for (w = 0; w < d->active; w++) {
		total += load[w];
		if (load[w] > load[hi])
			hi = w;
		if (load[w] < load[lo])
			lo = w;
	}
	if (hi == lo || !total ||
	    (double)load[hi] * d->active <= (1 + d->cfg.imbalance) * total)
		return 0;
	mean = total / d->active;
	gap = load[hi] - mean < mean - load[lo] ? load[hi] - mean
						: mean - load[lo];
	for (;;) {
		struct bucket *best = NULL;

		for (b = 0; b < VZ_DISPATCH_NBUCKETS; b++) {
			struct bucket *k = &d->buckets[b];

			if (destination(k) == hi && k->load + 1 <= gap &&
			    (!best || k->load > best->load))
				best = k;
		}
		if (!best)
			return moved;
		gap -= best->load + 1;
		send_bucket(d, best, lo);
		moved++;
	}
}

/* Steps until the load is even or nothing fits. */
static void even_out(struct vz_dispatch *d)
{
	unsigned int step;

	d->stats.rebalances++;
	for (step = 0; step < d->active; step++)
		if (!rebalance_step(d))
			break;
}

/*
 * Even out, then a new period. Not
 * while the active set is still settling: the allocator grows and shrinks
 * in bursts, and buckets evened over a set about to change again would
 * only be moved back (that thrash cost 100x rss-mod's p99 at low load).
 */
static void rebalance(struct vz_dispatch *d)
{
	unsigned int b;

	if (d->now - d->changed_at < d->cfg.settle_ns)
		return;
	even_out(d);
	for (b = 0; b < VZ_DISPATCH_NBUCKETS; b++)
		d->buckets[b].load /= 2;
}

/*
 * adaptive: spread by load once queues differ by more than the gap
 * flow-affinity tolerates, hash while they do not.
 */
static void adapt(struct vz_dispatch *d)
{
	unsigned int w;
	__u32 lo = ~0u, hi = 0;

	for (w = 0; w < d->active; w++) {
		if (d->view.load[w] < lo)
			lo = d->view.load[w];
		if (d->view.load[w] > hi)
			hi = d->view.load[w];
	}
	d->view.spread = hi - lo > d->cfg.migrate_gap;
}

void vz_dispatch_tick(struct vz_dispatch *d, __u64 now_ns)
{
	unsigned int i;

	d->now = now_ns;
	if (d->cfg.policy == VZ_DISPATCH_ADAPTIVE)
		adapt(d);
	if (now_ns >= d->next_rebalance) {
		/* A new period: a new budget of forced moves. */
		d->forced_left = d->cfg.max_forced;
		d->view.may_force = d->forced_left > 0;
		if (d->next_rebalance && d->cfg.policy == VZ_DISPATCH_BUCKETS)
			rebalance(d);
		d->next_rebalance = now_ns + d->cfg.rebalance_ns;
	}
	for (i = 0; i < AGE_SLICE; i++) {
		struct flow *f = &d->flows[d->age_cursor++ & d->mask];

		if (f->used && is_idle(d, f, now_ns)) {
			forget(d, f);
			d->stats.flows_aged++;
		}
	}
}

/*
 * Flows need nothing here: policy.h moves a flow of a parked worker, or
 * one whose worker is behind a new, empty one, at its next frame once it
 * has none in flight. Buckets of parked workers are sent, all at once, to
 * the least loaded; a new worker starts empty and gets its share at once,
 * as one group. Periodic rebalances wait for the set to settle.
 */
void vz_dispatch_set_active(struct vz_dispatch *d, unsigned int n)
{
	__u64 load[VZ_DISPATCH_MAX_WORKERS];
	unsigned int b, w, to;

	if (n < 1)
		n = 1;
	if (n > d->cfg.workers)
		n = d->cfg.workers;
	if (n == d->active)
		return;
	d->active = n;
	d->view.nactive = n;
	d->changed_at = d->now;
	if (d->cfg.policy != VZ_DISPATCH_BUCKETS)
		return;
	worker_loads(d, load);
	for (b = 0; b < VZ_DISPATCH_NBUCKETS; b++) {
		struct bucket *k = &d->buckets[b];

		if (destination(k) < n)
			continue;
		for (to = 0, w = 1; w < n; w++)
			if (load[w] < load[to])
				to = w;
		load[to] += k->load + 1;
		send_bucket(d, k, to);
	}
	even_out(d);
}

unsigned int vz_dispatch_active(const struct vz_dispatch *d)
{
	return d->active;
}

__u32 vz_dispatch_in_flight(const struct vz_dispatch *d, unsigned int worker)
{
	return d->view.load[worker];
}

int vz_dispatch_prepopulate(struct vz_dispatch *d, const __u32 *hashes,
			    size_t n, __u64 now_ns)
{
	size_t i;
	bool fresh;

	for (i = 0; i < n; i++) {
		struct flow *f = find_flow(d, hashes[i], now_ns, &fresh);
		unsigned int w, k;

		if (!f)
			return -1;
		if (!fresh)
			continue;
		for (w = 0, k = 1; k < d->active; k++)
			if (d->flows_on[k] < d->flows_on[w])
				w = k;
		f->worker = (__u8)w;
		f->last_ns = now_ns;
		d->flows_on[w]++;
	}
	return 0;
}

void vz_dispatch_record(struct vz_dispatch *d, vz_dispatch_recorder_fn *fn,
			void *arg)
{
	d->recorder = fn;
	d->recorder_arg = arg;
}

void vz_dispatch_get_stats(const struct vz_dispatch *d,
			   struct vz_dispatch_stats *s)
{
	*s = d->stats;
	memcpy(s->in_flight, d->view.load, sizeof(s->in_flight));
	s->compared = d->view.compared;
	s->active = d->active;
}
