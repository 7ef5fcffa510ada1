// SPDX-License-Identifier: BSD-2-Clause
/* The userspace dispatcher and its workers' loop (dispatcher.h). */
#include <errno.h>
#include <sched.h>

#include "common/clock.h"
#include "dispatch/dispatcher.h"
#include "dispatch/park.h"
#include "dispatch/spsc.h"

#define IDLE_SPINS 256 /* empty polls before a thread yields its CPU */
#define PUBLISH_NS 1000000 /* stats snapshot for the counting thread */

_Static_assert(VZ_DISPATCH_MAX_WORKERS <= 64, "a burst's workers: a __u64");

int vz_dispatcher_init(struct vz_dispatcher *dc,
		       const struct vz_dispatcher_config *cfg)
{
	struct vz_core_alloc_config acfg;
	struct vz_dispatch_config pcfg;
	unsigned int i;

	if (!cfg->workers || cfg->workers > VZ_DISPATCH_MAX_WORKERS ||
	    !cfg->batch || cfg->batch > VZ_DISPATCH_BURST ||
	    !cfg->ops->collect_budget)
		return -EINVAL;
	dc->cfg = *cfg;
	dc->nworkers = cfg->workers;
	vz_dispatch_report_init(&dc->report, cfg->policy, cfg->workers);
	dc->report.alloc = cfg->alloc;
	vz_dispatch_config_default(&pcfg, cfg->policy, cfg->workers);
	dc->policy = vz_dispatch_new(&pcfg);
	if (!dc->policy)
		return -EINVAL;
	vz_core_alloc_config_default(&acfg, cfg->workers);
	if (vz_core_alloc_init(&dc->alloc, &acfg, vz_now_ns()))
		return -EINVAL;
	/* The allocator starts from one worker and grows with the load. */
	if (cfg->alloc)
		vz_dispatch_set_active(dc->policy, 1);
	dc->active = vz_dispatch_active(dc->policy);
	for (i = 0; i < dc->nworkers; i++) {
		dc->workers[i].dc = dc;
		dc->workers[i].id = i;
	}
	return 0;
}

void vz_dispatcher_destroy(struct vz_dispatcher *dc)
{
	vz_dispatch_free(dc->policy);
	dc->policy = NULL;
	if (dc->nworkers)
		vz_dispatch_report_destroy(&dc->report);
	dc->nworkers = 0;
}

/* The run's flag, set by a signal handler or another thread. */
static bool stopping(const struct vz_dispatcher *dc)
{
	return __atomic_load_n(dc->cfg.stop, __ATOMIC_RELAXED);
}

static void wake(struct vz_dispatcher_worker *w)
{
	vz_park_wake(&w->sleeping);
}

/* ---- spsc.h's rings -------------------------------------------------------
 */

static unsigned int spsc_push(void *ring, const void *entries, size_t size,
			      unsigned int n)
{
	(void)size; /* the ring's own */
	return vz_spsc_push_burst(ring, entries, n);
}

static unsigned int spsc_pop(void *ring, void *entries, size_t size,
			     unsigned int n)
{
	(void)size;
	return vz_spsc_pop_burst(ring, entries, n);
}

static unsigned int spsc_count(void *ring)
{
	return vz_spsc_count(ring);
}

const struct vz_dispatch_ring_ops vz_dispatch_spsc_ring = {
	.push = spsc_push,
	.pop = spsc_pop,
	.count = spsc_count,
};

/* ---- the dispatcher --------------------------------------------------------
 */

/* The jobs of this burst for one worker onto its ring; the rest dropped. */
static void hand(struct vz_dispatcher *dc, struct vz_dispatcher_worker *w,
		 __u64 now)
{
	unsigned int n, i;

	n = dc->cfg.ops->ring->push(w->jobs, w->stage, sizeof(*w->stage),
				    w->staged);
	for (i = 0; i < n; i++)
		w->stamp[(w->pushed + i) & (VZ_DISPATCH_RING - 1)] = now;
	w->pushed += n;
	if (n < w->staged) {
		for (i = n; i < w->staged; i++)
			vz_dispatch_cancel(dc->policy, w->id,
					   &w->stage[i].ticket);
		dc->ring_full += w->staged - n;
		dc->cfg.ops->drop(dc->cfg.be, w->stage + n, w->staged - n);
	}
	w->staged = 0;
	if (n)
		wake(w); /* a parked worker keeping busy flows */
}

/* One burst from a port's queue slot: returns the frames received. */
static unsigned int receive(struct vz_dispatcher *dc, unsigned int port,
			    unsigned int slot, __u64 now)
{
	struct vz_dispatch_burst *b = &dc->burst;
	struct vz_dispatcher_worker *w;
	__u64 touched = 0;
	unsigned int n, i, to;

	n = dc->cfg.ops->rx(dc->cfg.be, port, slot, b);
	for (i = 0; i < b->n; i++) {
		/* a stage per worker, in arrival order: flows stay in order */
		to = vz_dispatch_pick(dc->policy, b->hash[i], now,
				      &b->job[i].ticket);
		w = &dc->workers[to];
		w->stage[w->staged++] = b->job[i];
		touched |= 1ull << to;
	}
	for (; touched; touched &= touched - 1)
		hand(dc, &dc->workers[__builtin_ctzll(touched)], now);
	return n;
}

/* Verdicts back, each worker's up to the backend's budget: returns them. */
static unsigned int collect(struct vz_dispatcher *dc)
{
	const struct vz_dispatch_ops *ops = dc->cfg.ops;
	struct vz_dispatch_result *r = dc->results;
	unsigned int i, k, n, want, budget, total = 0;

	for (i = 0; i < dc->nworkers; i++) {
		for (budget = ops->collect_budget; budget; budget -= n) {
			want = budget < VZ_DISPATCH_BURST ? budget
							  : VZ_DISPATCH_BURST;
			n = ops->ring->pop(dc->workers[i].results, r,
					   sizeof(*r), want);
			for (k = 0; k < n; k++)
				vz_dispatch_done(dc->policy, i, &r[k].ticket);
			if (n)
				ops->tx(dc->cfg.be, r, n);
			total += n;
			if (n < want)
				break;
		}
	}
	return total;
}

/* The allocator's view: when each worker's oldest waiting frame came. */
static void allocate(struct vz_dispatcher *dc, __u64 now)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int i, before = dc->active, after, waiting;

	for (i = 0; i < before; i++) {
		struct vz_dispatcher_worker *w = &dc->workers[i];

		waiting = dc->cfg.ops->ring->count(w->jobs);
		if (waiting)
			oldest[i] = w->stamp[(w->pushed - waiting) &
					     (VZ_DISPATCH_RING - 1)];
	}
	after = vz_core_alloc_tick(&dc->alloc, dc->policy, now, oldest);
	if (after == before)
		return;
	/* release: a worker that sees the new count sees the policy's */
	__atomic_store_n(&dc->active, after, __ATOMIC_RELEASE);
	for (i = before; i < after; i++)
		wake(&dc->workers[i]);
}

static void publish(struct vz_dispatcher *dc, __u64 now, bool last)
{
	vz_dispatch_report_publish(&dc->report, dc->policy, &dc->alloc,
				   dc->ring_full, dc->active_ns,
				   now - dc->start_ns, last);
}

void vz_dispatcher_run(struct vz_dispatcher *dc)
{
	const struct vz_dispatch_ops *ops = dc->cfg.ops;
	__u64 now = vz_now_ns(), last = now, next_publish = now;
	unsigned int port, slot, idle = 0, work;

	dc->start_ns = now;
	while (!stopping(dc)) {
		now = vz_now_ns();
		dc->active_ns += (now - last) * dc->active;
		last = now;
		work = 0;
		for (slot = 0; slot < dc->cfg.nslots; slot++)
			for (port = 0; port < dc->cfg.nports; port++)
				work += receive(dc, port, slot, now);
		work += collect(dc);
		ops->service(dc->cfg.be);
		/*
		 * Idle: let a worker that shares this CPU run (with fewer
		 * CPUs than threads it otherwise waits for the scheduler to
		 * preempt a spinning dispatcher: milliseconds).
		 */
		if (work)
			idle = 0;
		else if (++idle % IDLE_SPINS == 0)
			sched_yield();
		vz_dispatch_tick(dc->policy, now);
		if (dc->cfg.alloc)
			allocate(dc, now);
		if (now >= next_publish) {
			publish(dc, now, false);
			next_publish = now + PUBLISH_NS;
		}
	}
	now = vz_now_ns();
	dc->active_ns += (now - last) * dc->active;
	publish(dc, now, true);
	__atomic_store_n(&dc->dispatcher_done, true, __ATOMIC_RELEASE);
	if (ops->stopped)
		ops->stopped(dc->cfg.be);
}

/* ---- workers ---------------------------------------------------------------
 */

/*
 * Verdicts back to the dispatcher, which empties this ring every loop. Once
 * it has stopped, what finds no room is the backend's to discard.
 */
static void hand_back(struct vz_dispatcher_worker *w,
		      const struct vz_dispatch_result *r, unsigned int n)
{
	const struct vz_dispatch_ops *ops = w->dc->cfg.ops;
	unsigned int sent = 0;

	for (;;) {
		sent += ops->ring->push(w->results, r + sent, sizeof(*r),
					n - sent);
		if (sent == n)
			return;
		if (__atomic_load_n(&w->dc->dispatcher_done, __ATOMIC_ACQUIRE))
			break;
		sched_yield();
	}
	if (ops->discard)
		ops->discard(w->dc->cfg.be, r + sent, n - sent);
}

/* True if w is parked: then it sleeps until woken, or a while. */
static bool park(struct vz_dispatcher_worker *w)
{
	struct vz_dispatcher *dc = w->dc;

	if (stopping(dc) ||
	    w->id < __atomic_load_n(&dc->active, __ATOMIC_ACQUIRE))
		return false;
	__atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
	if (!dc->cfg.ops->ring->count(w->jobs) &&
	    w->id >= __atomic_load_n(&dc->active, __ATOMIC_ACQUIRE))
		vz_park_wait(&w->sleeping);
	__atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
	return true;
}

/*
 * A worker stops after the dispatcher, with its ring empty: every frame
 * the dispatcher handed over is run, so the frames the policy counted are
 * the NF's, less those a full ring refused (ring_full), exactly.
 */
void vz_dispatcher_work(struct vz_dispatcher_worker *w)
{
	struct vz_dispatcher *dc = w->dc;
	/* constant: kept in locals, which the calls out cannot change */
	const struct vz_dispatch_ops *ops = dc->cfg.ops;
	void *be = dc->cfg.be, *ring = w->jobs;
	unsigned int batch = dc->cfg.batch, id = w->id, idle = 0, n;
	struct vz_dispatch_job jobs[VZ_DISPATCH_BURST];
	struct vz_dispatch_result r[VZ_DISPATCH_BURST];
	bool last;

	for (;;) {
		/* read before the ring: its last frames came before this */
		last = __atomic_load_n(&dc->dispatcher_done, __ATOMIC_ACQUIRE);
		n = ops->ring->pop(ring, jobs, sizeof(*jobs), batch);
		if (n) {
			ops->run(be, id, jobs, r, n);
			hand_back(w, r, n);
			idle = 0;
			continue;
		}
		if (last)
			break;
		/* Active: poll, but let a CPU shared with others go. */
		if (!park(w) && ++idle % IDLE_SPINS == 0)
			sched_yield();
	}
}

/* ---- threads ---------------------------------------------------------------
 */

int vz_dispatcher_start(struct vz_dispatcher *dc)
{
	unsigned int i;
	int err;

	for (i = 0; i < dc->nworkers; i++) {
		err = dc->cfg.ops->start(dc->cfg.be, (int)i);
		if (err)
			return err;
	}
	return dc->cfg.ops->start(dc->cfg.be, -1);
}

void vz_dispatcher_join(struct vz_dispatcher *dc)
{
	unsigned int i;

	dc->cfg.ops->wait(dc->cfg.be, -1);
	/* also when it never started: then no worker waits for it */
	__atomic_store_n(&dc->dispatcher_done, true, __ATOMIC_RELEASE);
	for (i = 0; i < dc->nworkers; i++) {
		wake(&dc->workers[i]);
		dc->cfg.ops->wait(dc->cfg.be, (int)i);
	}
}
