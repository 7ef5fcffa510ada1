// SPDX-License-Identifier: BSD-2-Clause
/*
 * The afxdp backend's part of the dispatch stage (--dispatch), whose loops
 * are src/dispatch/dispatcher.c's: the dispatcher thread owns every socket
 * and the UMEM. A job is a frame's UMEM address; the dispatcher hashes the
 * flow in software (vz_rss_hash_frame: veth and copy mode hand no RSS hash
 * over), workers run the NF in place in the dispatcher's UMEM, and the
 * dispatcher sends or frees the frame, so every socket ring keeps its
 * single producer and consumer, as AF_XDP requires. The rings between
 * them are dispatch/spsc.h's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "afxdp/afxdp.h"
#include "dispatch/dispatcher.h"
#include "dispatch/report.h"
#include "dispatch/spsc.h"
#include "dispatch/toeplitz.h"

_Static_assert(VZ_US_BATCH_MAX <= VZ_DISPATCH_BURST, "a burst fits");

/* A worker's thread and rings. */
struct nf_worker {
	pthread_t thread;
	bool running;
	struct vz_spsc jobs, results;
};

struct vz_afxdp_dispatch {
	struct vz_us_run *run;
	struct worker *owner; /* the dispatcher: sockets and UMEM */
	unsigned long loops;
	struct nf_worker workers[VZ_MAX_WORKERS];
	struct vz_dispatcher core; /* the loops, policy, allocator, report */
};

/* ---- the dispatcher's ports ------------------------------------------------
 */

static unsigned int rx(void *be, unsigned int port, unsigned int slot,
		       struct vz_dispatch_burst *b)
{
	struct vz_afxdp_dispatch *ds = be;
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;
	struct xsk *x = w->xsk[port][slot];
	__u8 *area = w->area;
	__u32 idx, n, i;

	b->n = 0;
	n = afxdp_rx_peek(ds->run, x, &idx);
	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		const struct xdp_desc *d =
			xsk_ring_cons__rx_desc(&x->rx, idx + i);

		if (!afxdp_rx_valid(w, d, c))
			continue;
		b->job[b->n] = (struct vz_dispatch_job){ .frame = d->addr,
							 .len = d->len,
							 .port = (__u16)port,
							 .slot = (__u16)slot };
		b->hash[b->n++] = vz_rss_hash_frame(area + d->addr, d->len);
	}
	/* the descriptors are copied; the frames stay ours until freed */
	xsk_ring_cons__release(&x->rx, n);
	return n;
}

static void drop(void *be, const struct vz_dispatch_job *jobs, unsigned int n)
{
	struct vz_afxdp_dispatch *ds = be;
	unsigned int i;

	for (i = 0; i < n; i++)
		afxdp_frame_free(ds->owner, jobs[i].frame);
}

static void tx(void *be, const struct vz_dispatch_result *r, unsigned int n)
{
	struct vz_afxdp_dispatch *ds = be;
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (r[i].out < 0)
			afxdp_frame_free(w, r[i].frame);
		else
			afxdp_queue_tx(w, w->xsk[r[i].out][r[i].slot],
				       r[i].frame, r[i].len, c);
	}
}

static void service(void *be)
{
	struct vz_afxdp_dispatch *ds = be;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;

	if (++ds->loops % TAP_POLL_EVERY == 0)
		afxdp_drain_taps(ds->owner, c);
	afxdp_service_rings(ds->owner, c);
}

/* ---- workers ---------------------------------------------------------------
 */

static void run_job(struct vz_afxdp_dispatch *ds, unsigned int id,
		    const struct vz_dispatch_job *j,
		    struct vz_dispatch_result *r)
{
	struct vz_us_run *run = ds->run;
	__u8 *area = ds->owner->area;
	__u64 base = j->frame & ~(__u64)(FRAME_SIZE - 1);
	struct vz_ctx ctx = {
		.data = area + j->frame,
		.data_end = area + j->frame + j->len,
		.data_hard_start = area + base,
		.ingress_port = j->port,
	};

	*r = (struct vz_dispatch_result){ .slot = j->slot,
					  .ticket = j->ticket };
	/* veloz dump: a job is one frame, so the switch is read per frame */
	r->out = (__s16)vz_us_out_port(
		vz_us_process_cap(run, &ctx, &run->counters[id],
				  vz_capture_burst(), id),
		&ctx);
	r->frame = (__u64)(ctx.data - area);
	r->len = (__u32)(ctx.data_end - ctx.data);
	if (r->out < 0)
		r->frame = base;
}

static void run_jobs(void *be, unsigned int id,
		     const struct vz_dispatch_job *jobs,
		     struct vz_dispatch_result *r, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		run_job(be, id, &jobs[i], &r[i]);
}

/* ---- threads ---------------------------------------------------------------
 */

static void *worker_main(void *arg)
{
	struct vz_dispatcher_worker *w = arg;

	vz_us_worker_enter(w->id);
	vz_dispatcher_work(w);
	return NULL;
}

static void *dispatcher_main(void *arg)
{
	vz_dispatcher_run(arg);
	return NULL;
}

/* Worker i on CPU i; the dispatcher on the last one. */
static int start(void *be, int who)
{
	struct vz_afxdp_dispatch *ds = be;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct nf_worker *nw = &ds->workers[who < 0 ? 0 : who];
	int err;

	if (who < 0) {
		err = afxdp_start_thread(&ds->owner->thread, dispatcher_main,
					 &ds->core, (int)(ncpus - 1),
					 "dispatcher", 0);
		ds->owner->running = !err;
		return err;
	}
	err = afxdp_start_thread(&nw->thread, worker_main,
				 &ds->core.workers[who], who % (int)ncpus,
				 "worker", (unsigned int)who);
	nw->running = !err;
	return err;
}

static void wait_for(void *be, int who)
{
	struct vz_afxdp_dispatch *ds = be;
	pthread_t thread = ds->owner->thread;
	bool *running = &ds->owner->running;

	if (who >= 0) {
		thread = ds->workers[who].thread;
		running = &ds->workers[who].running;
	}
	if (*running) {
		pthread_join(thread, NULL);
		*running = false;
	}
}

static const struct vz_dispatch_ops afxdp_dispatch_ops = {
	.ring = &vz_dispatch_spsc_ring,
	.rx = rx,
	.drop = drop,
	.tx = tx,
	.service = service,
	/* a worker frees nothing: free frames are the dispatcher's stack */
	.run = run_jobs,
	.start = start,
	.wait = wait_for,
	.collect_budget = VZ_DISPATCH_RING,
};

/* ---- setup, start, stop ----------------------------------------------------
 */

int afxdp_dispatch_setup(struct vz_us_run *run, struct afxdp *a)
{
	struct vz_afxdp_dispatch *ds = calloc(1, sizeof(*ds));
	struct vz_dispatcher_config cfg = {
		.policy = (enum vz_dispatch_policy)run->dispatch,
		.workers = run->workers,
		.alloc = run->alloc,
		.nports = (unsigned int)run->nports,
		.nslots = a->workers[0].nqueues,
		.batch = run->batch,
		.stop = &run->stop,
		.ops = &afxdp_dispatch_ops,
	};
	unsigned int i;

	if (!ds)
		return -ENOMEM;
	a->dispatch = ds;
	ds->run = run;
	ds->owner = &a->workers[0];
	cfg.be = ds;
	if (vz_dispatcher_init(&ds->core, &cfg))
		return -EINVAL;
	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];

		if (vz_spsc_init(&nw->jobs, VZ_DISPATCH_RING,
				 sizeof(struct vz_dispatch_job)) ||
		    vz_spsc_init(&nw->results, VZ_DISPATCH_RING,
				 sizeof(struct vz_dispatch_result))) {
			vz_err("cannot allocate the dispatch rings");
			return -ENOMEM;
		}
		ds->core.workers[i].jobs = &nw->jobs;
		ds->core.workers[i].results = &nw->results;
	}
	return 0;
}

int afxdp_dispatch_start(struct vz_us_run *run, struct afxdp *a)
{
	(void)run;
	return vz_dispatcher_start(&a->dispatch->core);
}

void afxdp_dispatch_join(struct vz_us_run *run, struct afxdp *a)
{
	(void)run;
	vz_dispatcher_join(&a->dispatch->core);
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
	vz_dispatcher_destroy(&ds->core);
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
