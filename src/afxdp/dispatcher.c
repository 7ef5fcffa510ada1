// SPDX-License-Identifier: BSD-2-Clause
/*
 * The afxdp backend's dispatch stage (--dispatch): one thread, the
 * dispatcher, owns every socket. It takes each received frame, hashes its
 * flow (vz_rss_hash_frame: veth and copy mode hand no RSS hash over), asks
 * the policy (dispatch/dispatch.c) for a worker and passes the frame on a
 * lock-free ring. Workers run the NF in place, in the dispatcher's UMEM,
 * and hand the verdict back on a second ring; the dispatcher sends or frees
 * the frame, so every socket ring keeps its single producer and consumer,
 * as AF_XDP requires. Calisto's IOKernel works the same way over DPDK.
 *
 * With --alloc the core allocator (dispatch/core_alloc.c) grows and shrinks
 * the active workers with queueing delay. A worker beyond the active ones
 * finishes what it holds and sleeps on a futex until woken: parked workers
 * cost no CPU.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "afxdp/afxdp.h"
#include "dispatch/dispatcher.h"
#include "dispatch/dispatch.h"
#include "dispatch/park.h"
#include "dispatch/report.h"
#include "runtime/capture.h"
#include "runtime/spsc.h"
#include "dispatch/toeplitz.h"

#define JOB_RING 4096 /* frames queued per worker, a power of two */
#define IDLE_SPINS 256 /* empty polls before a worker yields its CPU */
#define PUBLISH_NS 1000000 /* stats snapshot for the counting thread */
#define TAP_POLL_EVERY 64

/* A frame, from the dispatcher to a worker. */
struct job {
	__u64 addr; /* of the frame's data in the UMEM */
	__u64 enqueued_ns;
	__u32 len;
	__u16 port, slot; /* received on: port, the dispatcher's queue slot */
	struct vz_dispatch_ticket ticket;
};

/* ... and back, after the NF. */
struct result {
	__u64 addr; /* the data now: the NF may have moved its head */
	__u32 len;
	__s16 out; /* port to send it from; -1: free it */
	__u16 slot;
	struct vz_dispatch_ticket ticket;
};

struct nf_worker {
	unsigned int id;
	struct vz_afxdp_dispatch *ds;
	pthread_t thread;
	bool running;
	struct vz_spsc jobs, results;
	int sleeping; /* futex word: 1 while parked */
	__u64 wakeups;
};

struct vz_afxdp_dispatch {
	struct vz_us_run *run;
	struct worker *owner; /* the dispatcher: sockets and UMEM */
	struct vz_dispatcher core; /* policy, allocator, report */
	struct nf_worker workers[VZ_MAX_WORKERS];
};

static void wake(struct nf_worker *w)
{
	if (vz_park_wake(&w->sleeping))
		w->wakeups++;
}

/* ---- workers ---------------------------------------------------------------
 */

static void run_job(struct nf_worker *nw, const struct job *j)
{
	struct vz_us_run *run = nw->ds->run;
	struct vz_worker_counters *c = &run->counters[nw->id];
	__u8 *area = nw->ds->owner->area;
	__u64 base = j->addr & ~(__u64)(FRAME_SIZE - 1);
	struct vz_ctx ctx = {
		.data = area + j->addr,
		.data_end = area + j->addr + j->len,
		.data_hard_start = area + base,
		.ingress_port = j->port,
	};
	struct result r = { .slot = j->slot, .ticket = j->ticket };

	/* veloz dump: a job is one frame, so the switch is read per frame */
	r.out = (__s16)vz_us_out_port(
		vz_us_process_cap(run, &ctx, c, vz_capture_burst(), nw->id),
		&ctx);
	r.addr = (__u64)(ctx.data - area);
	r.len = (__u32)(ctx.data_end - ctx.data);
	if (r.out < 0)
		r.addr = base;
	/* The dispatcher empties this ring every loop: wait for room. */
	while (!vz_spsc_push(&nw->results, &r) &&
	       !__atomic_load_n(&nw->ds->core.dispatcher_done,
				__ATOMIC_ACQUIRE))
		sched_yield();
}

/*
 * A worker stops after the dispatcher, with its ring empty: every frame
 * the dispatcher handed over is run, so the frames the policy counted are
 * the NF's, less those a full ring refused (ring_full), exactly.
 */
static void *worker_main(void *arg)
{
	struct nf_worker *nw = arg;
	struct vz_us_run *run = nw->ds->run;
	unsigned int idle = 0;
	struct job j;
	bool last;

	vz_us_worker_enter(nw->id);
	for (;;) {
		/* read before the ring: its last frames came before this */
		last = __atomic_load_n(&nw->ds->core.dispatcher_done,
				       __ATOMIC_ACQUIRE);
		if (vz_spsc_pop(&nw->jobs, &j)) {
			run_job(nw, &j);
			idle = 0;
			continue;
		}
		if (last)
			break;
		if (run->stop || nw->id < __atomic_load_n(&nw->ds->core.active,
							  __ATOMIC_ACQUIRE)) {
			/* Active: poll, but let a CPU shared with others go. */
			if (++idle % IDLE_SPINS == 0)
				sched_yield();
			continue;
		}
		/* Parked, and nothing left: sleep until woken. */
		__atomic_store_n(&nw->sleeping, 1, __ATOMIC_SEQ_CST);
		if (!vz_spsc_count(&nw->jobs) &&
		    nw->id >= __atomic_load_n(&nw->ds->core.active,
					      __ATOMIC_ACQUIRE))
			vz_park_wait(&nw->sleeping);
		__atomic_store_n(&nw->sleeping, 0, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* ---- the dispatcher --------------------------------------------------------
 */

/* Returns the frames taken from the socket's receive ring. */
static __u32 dispatch_rx(struct vz_afxdp_dispatch *ds, int p, unsigned int q,
			 __u64 now)
{
	struct worker *w = ds->owner;
	struct vz_us_run *run = ds->run;
	struct vz_worker_counters *c = &run->dispatcher_counters;
	struct xsk *x = w->xsk[p][q];
	__u8 *area = w->area;
	__u32 idx, n, i;

	n = afxdp_rx_peek(run, x, &idx);
	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		const struct xdp_desc *d =
			xsk_ring_cons__rx_desc(&x->rx, idx + i);
		__u64 base = d->addr & ~(__u64)(FRAME_SIZE - 1);
		struct job j = { .addr = d->addr,
				 .len = d->len,
				 .port = (__u16)p,
				 .slot = (__u16)q,
				 .enqueued_ns = now };
		unsigned int to;

		if (!afxdp_rx_valid(w, d, c))
			continue;
		to = vz_dispatch_pick(ds->core.policy,
				      vz_rss_hash_frame(area + d->addr, d->len),
				      now, &j.ticket);
		if (!vz_spsc_push(&ds->workers[to].jobs, &j)) {
			vz_dispatch_cancel(ds->core.policy, to, &j.ticket);
			ds->core.ring_full++;
			afxdp_frame_free(w, base);
			continue;
		}
		wake(&ds->workers[to]); /* a parked worker keeping busy flows */
	}
	xsk_ring_cons__release(&x->rx, n);
	return n;
}

/* Returns the verdicts collected. */
static unsigned int collect_results(struct vz_afxdp_dispatch *ds)
{
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;
	unsigned int i, budget, n = 0;
	struct result r;

	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];

		for (budget = JOB_RING; budget && vz_spsc_pop(&nw->results, &r);
		     budget--) {
			vz_dispatch_done(ds->core.policy, i, &r.ticket);
			if (r.out < 0)
				afxdp_frame_free(w, r.addr);
			else
				afxdp_queue_tx(w, w->xsk[r.out][r.slot], r.addr,
					       r.len, c);
			n++;
		}
	}
	return n;
}

/* The allocator's view: when each worker's oldest waiting frame came. */
static void allocate(struct vz_afxdp_dispatch *ds, __u64 now)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int i, before = ds->core.active, after;
	struct job j;

	for (i = 0; i < before; i++)
		if (vz_spsc_peek_producer(&ds->workers[i].jobs, &j))
			oldest[i] = j.enqueued_ns;
	vz_dispatcher_allocate(&ds->core, now, oldest);
	after = ds->core.active;
	for (i = before; i < after; i++)
		wake(&ds->workers[i]);
}

static void *dispatcher_main(void *arg)
{
	struct vz_afxdp_dispatch *ds = arg;
	struct worker *w = ds->owner;
	struct vz_us_run *run = ds->run;
	struct vz_worker_counters *c = &run->dispatcher_counters;
	__u64 now = vz_now_ns(), last = now, next_publish = now;
	unsigned long loops = 0;
	unsigned int q, idle = 0, work;
	int p;

	ds->core.start_ns = now;
	while (!run->stop) {
		now = vz_now_ns();
		ds->core.active_ns += (now - last) * ds->core.active;
		last = now;
		work = 0;
		for (q = 0; q < w->nqueues; q++)
			for (p = 0; p < run->nports; p++)
				work += dispatch_rx(ds, p, q, now);
		work += collect_results(ds);
		/*
		 * Idle: let a worker that shares this CPU run (on a machine
		 * with fewer CPUs than threads, it otherwise waits for the
		 * scheduler to preempt a spinning dispatcher: milliseconds).
		 */
		if (work)
			idle = 0;
		else if (++idle % IDLE_SPINS == 0)
			sched_yield();
		if (++loops % TAP_POLL_EVERY == 0)
			afxdp_drain_taps(w, c);
		afxdp_service_rings(w, c);
		vz_dispatch_tick(ds->core.policy, now);
		if (run->alloc)
			allocate(ds, now);
		if (now >= next_publish) {
			vz_dispatcher_publish(&ds->core, now, false);
			next_publish = now + PUBLISH_NS;
		}
	}
	now = vz_now_ns();
	ds->core.active_ns += (now - last) * ds->core.active;
	vz_dispatcher_publish(&ds->core, now, true);
	__atomic_store_n(&ds->core.dispatcher_done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- setup, start, stop ----------------------------------------------------
 */

int afxdp_dispatch_setup(struct vz_us_run *run, struct afxdp *a)
{
	struct vz_afxdp_dispatch *ds = calloc(1, sizeof(*ds));
	unsigned int i;

	if (!ds)
		return -ENOMEM;
	a->dispatch = ds;
	ds->run = run;
	ds->owner = &a->workers[0];
	if (vz_dispatcher_init(&ds->core,
			       (enum vz_dispatch_policy)run->dispatch,
			       run->workers, run->alloc))
		return -EINVAL;
	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];

		nw->id = i;
		nw->ds = ds;
		if (vz_spsc_init(&nw->jobs, JOB_RING, sizeof(struct job)) ||
		    vz_spsc_init(&nw->results, JOB_RING,
				 sizeof(struct result))) {
			vz_err("cannot allocate the dispatch rings");
			return -ENOMEM;
		}
	}
	return 0;
}

int afxdp_dispatch_start(struct vz_us_run *run, struct afxdp *a)
{
	struct vz_afxdp_dispatch *ds = a->dispatch;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i;
	int err;

	(void)run;
	/* Worker i on CPU i; the dispatcher on the last one. */
	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];

		err = afxdp_start_thread(&nw->thread, worker_main, nw,
					 (int)(i % (unsigned long)ncpus),
					 "worker", i);
		if (err)
			return err;
		nw->running = true;
	}
	err = afxdp_start_thread(&ds->owner->thread, dispatcher_main, ds,
				 (int)(ncpus - 1), "dispatcher", 0);
	if (err)
		return err;
	ds->owner->running = true;
	return 0;
}

void afxdp_dispatch_join(struct vz_us_run *run, struct afxdp *a)
{
	struct vz_afxdp_dispatch *ds = a->dispatch;
	unsigned int i;

	(void)run;
	if (ds->owner->running) {
		pthread_join(ds->owner->thread, NULL);
		ds->owner->running = false;
	}
	/* also when it never started: then no worker waits for it */
	__atomic_store_n(&ds->core.dispatcher_done, true, __ATOMIC_RELEASE);
	for (i = 0; i < ds->core.nworkers; i++)
		if (ds->workers[i].running) {
			wake(&ds->workers[i]);
			pthread_join(ds->workers[i].thread, NULL);
			ds->workers[i].running = false;
		}
}

void afxdp_dispatch_teardown(struct afxdp *a)
{
	struct vz_afxdp_dispatch *ds = a->dispatch;
	unsigned int i;

	if (!ds)
		return;
	for (i = 0; i < VZ_MAX_WORKERS; i++) {
		vz_spsc_free(&ds->workers[i].jobs);
		vz_spsc_free(&ds->workers[i].results);
	}
	vz_dispatch_free(ds->core.policy);
	vz_dispatch_report_destroy(&ds->core.report);
	free(ds);
	a->dispatch = NULL;
}

__u64 afxdp_dispatch_missed(struct afxdp *a)
{
	if (!a->dispatch)
		return 0;
	return vz_dispatch_report_ring_full(&a->dispatch->core.report);
}

/* ---- reporting -------------------------------------------------------------
 */

void afxdp_dispatch_report(struct vz_us_run *run, double t, bool summary)
{
	struct afxdp *a = run->backend_state;

	if (a && a->dispatch)
		vz_dispatch_report_print(&a->dispatch->core.report, run->json,
					 t, summary);
}

/* The figures since the start, in each counters line (JSON only). */
void afxdp_dispatch_extra(const void *arg, FILE *f, bool json)
{
	const struct vz_us_run *run = arg;
	struct afxdp *a = run->backend_state;

	if (json && a && a->dispatch)
		vz_dispatch_report_json(&a->dispatch->core.report, f);
}
