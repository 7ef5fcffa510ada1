// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"

/* Slots looked at for a flow before the table counts as full. */
#define PROBE 32
/* Flow-table slots aged per tick. */
#define AGE_SLICE 64
#define NO_WORKER 0xff

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
	__u32 in_flight;
	__u8 owner;
	__u8 pending; /* where it goes once nothing is in flight */
	__u64 pending_since;
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
	__u32 in_flight[VZ_DISPATCH_MAX_WORKERS];
	__u32 flows_on[VZ_DISPATCH_MAX_WORKERS];
	struct bucket buckets[VZ_DISPATCH_BUCKETS];
	struct vz_dispatch_stats stats;
};

static const char *const policy_names[] = {
	[VZ_DISPATCH_RSS_MOD] = "rss-mod",
	[VZ_DISPATCH_FLOW_AFFINITY] = "flow-affinity",
	[VZ_DISPATCH_BUCKETS_POLICY] = "buckets",
};

int vz_dispatch_policy_parse(const char *name)
{
	unsigned int i;

	for (i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++)
		if (!strcmp(name, policy_names[i]))
			return (int)i;
	return -1;
}

const char *vz_dispatch_policy_name(enum vz_dispatch_policy policy)
{
	return (unsigned int)policy < 3 ? policy_names[policy] : "?";
}

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
	if ((unsigned int)cfg->policy > VZ_DISPATCH_BUCKETS_POLICY ||
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
	for (b = 0; b < VZ_DISPATCH_BUCKETS; b++) {
		d->buckets[b].owner = (__u8)(b % cfg->workers);
		d->buckets[b].pending = NO_WORKER;
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

/* The active worker with the fewest frames in flight, then fewest flows. */
static unsigned int least_loaded(const struct vz_dispatch *d)
{
	unsigned int w, best = 0;

	for (w = 1; w < d->active; w++)
		if (d->in_flight[w] < d->in_flight[best] ||
		    (d->in_flight[w] == d->in_flight[best] &&
		     d->flows_on[w] < d->flows_on[best]))
			best = w;
	return best;
}

static unsigned int pick_flow_affinity(struct vz_dispatch *d, struct flow *f,
				       __u32 hash)
{
	if (!f) /* untracked: still deterministic per flow */
		return hash % d->active;
	if (f->worker != NO_WORKER && (f->worker < d->active || f->in_flight))
		return f->worker; /* a parked worker keeps a busy flow */
	return least_loaded(d);
}

static void move_bucket(struct vz_dispatch *d, struct bucket *b,
			unsigned int to)
{
	if (b->owner == to) {
		b->pending = NO_WORKER;
		return;
	}
	if (b->in_flight) {
		if (b->pending == NO_WORKER)
			b->pending_since = d->now;
		b->pending = (__u8)to;
		return;
	}
	b->owner = (__u8)to;
	b->pending = NO_WORKER;
	d->stats.buckets_moved++;
}

static unsigned int pick_bucket(struct vz_dispatch *d, struct bucket *b)
{
	if (b->pending == NO_WORKER)
		return b->owner;
	if (!b->in_flight) {
		move_bucket(d, b, b->pending);
	} else if (d->now - b->pending_since > d->cfg.hold_ns) {
		/* Its old worker never drains it: move it anyway. */
		b->owner = b->pending;
		b->pending = NO_WORKER;
		d->stats.buckets_moved++;
		d->stats.buckets_forced++;
	}
	return b->owner;
}

unsigned int vz_dispatch_pick(struct vz_dispatch *d, __u32 hash, __u64 now_ns,
			      struct vz_dispatch_ticket *t)
{
	struct bucket *b = &d->buckets[hash % VZ_DISPATCH_BUCKETS];
	unsigned int worker;
	struct flow *f;
	bool fresh;

	d->now = now_ns;
	f = find_flow(d, hash, now_ns, &fresh);
	switch (d->cfg.policy) {
	case VZ_DISPATCH_FLOW_AFFINITY:
		worker = pick_flow_affinity(d, f, hash);
		break;
	case VZ_DISPATCH_BUCKETS_POLICY:
		worker = pick_bucket(d, b);
		break;
	default:
		worker = hash % d->active;
	}
	*t = (struct vz_dispatch_ticket){ .hash = hash,
					  .bucket =
						  hash % VZ_DISPATCH_BUCKETS };
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
	d->in_flight[worker]++;
	d->stats.frames++;
	d->stats.frames_per_worker[worker]++;
	return worker;
}

void vz_dispatch_done(struct vz_dispatch *d, unsigned int worker,
		      const struct vz_dispatch_ticket *t)
{
	struct flow *f;

	d->in_flight[worker]--;
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
	d->in_flight[worker]--;
	d->buckets[t->bucket].in_flight--;
	if (t->flow)
		d->flows[t->flow - 1].in_flight--;
}

/* Load of every worker's buckets over the last period. */
static void worker_loads(const struct vz_dispatch *d, __u64 *load)
{
	unsigned int b;

	memset(load, 0, sizeof(*load) * VZ_DISPATCH_MAX_WORKERS);
	for (b = 0; b < VZ_DISPATCH_BUCKETS; b++) {
		const struct bucket *k = &d->buckets[b];

		load[k->pending != NO_WORKER ? k->pending : k->owner] +=
			k->load;
	}
}

/* Where a bucket is going: its pending owner, else its owner. */
static unsigned int destination(const struct bucket *k)
{
	return k->pending != NO_WORKER ? k->pending : k->owner;
}

/*
 * One step of RSS++: the busiest worker gives the idlest buckets worth what
 * brings one of them to the mean, largest first, so the fewest buckets
 * move. Returns the buckets moved.
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

		for (b = 0; b < VZ_DISPATCH_BUCKETS; b++) {
			struct bucket *k = &d->buckets[b];

			if (destination(k) == hi && k->load && k->load <= gap &&
			    (!best || k->load > best->load))
				best = k;
		}
		if (!best)
			return moved;
		gap -= best->load;
		move_bucket(d, best, lo); /* its destination is lo now */
		moved++;
	}
}

/* Steps until the load is even or nothing fits, then a new period. */
static void rebalance(struct vz_dispatch *d)
{
	unsigned int step, b;

	d->stats.rebalances++;
	for (step = 0; step < d->active; step++)
		if (!rebalance_step(d))
			break;
	for (b = 0; b < VZ_DISPATCH_BUCKETS; b++)
		d->buckets[b].load /= 2;
}

void vz_dispatch_tick(struct vz_dispatch *d, __u64 now_ns)
{
	unsigned int i;

	d->now = now_ns;
	if (d->cfg.policy == VZ_DISPATCH_BUCKETS_POLICY &&
	    now_ns >= d->next_rebalance) {
		if (d->next_rebalance)
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
	if (d->cfg.policy != VZ_DISPATCH_BUCKETS_POLICY)
		return;
	/* Buckets of parked workers go, one by one, to the least loaded. */
	worker_loads(d, load);
	for (b = 0; b < VZ_DISPATCH_BUCKETS; b++) {
		struct bucket *k = &d->buckets[b];

		if (destination(k) < n)
			continue;
		for (to = 0, w = 1; w < n; w++)
			if (load[w] < load[to])
				to = w;
		load[to] += k->load + 1; /* +1: spread unloaded ones too */
		move_bucket(d, k, to);
	}
	/* A new worker starts empty: give it its share now. */
	rebalance(d);
}

unsigned int vz_dispatch_active(const struct vz_dispatch *d)
{
	return d->active;
}

__u32 vz_dispatch_in_flight(const struct vz_dispatch *d, unsigned int worker)
{
	return d->in_flight[worker];
}

int vz_dispatch_prepopulate(struct vz_dispatch *d, const __u32 *hashes,
			    size_t n, __u64 now_ns)
{
	size_t i;
	bool fresh;

	for (i = 0; i < n; i++) {
		struct flow *f = find_flow(d, hashes[i], now_ns, &fresh);
		unsigned int w;

		if (!f)
			return -1;
		if (!fresh)
			continue;
		w = least_loaded(d);
		f->worker = (__u8)w;
		f->last_ns = now_ns;
		d->flows_on[w]++;
	}
	return 0;
}

void vz_dispatch_get_stats(const struct vz_dispatch *d,
			   struct vz_dispatch_stats *s)
{
	*s = d->stats;
	memcpy(s->in_flight, d->in_flight, sizeof(s->in_flight));
	s->active = d->active;
}
