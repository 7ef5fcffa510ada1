// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's dispatch stage (--dispatch), the shape of afxdp's
 * (src/afxdp/dispatcher.c) and of Calisto's IOKernel: one lcore,
 * the dispatcher, owns every port queue. It takes each received mbuf,
 * hashes its flow (the port's RSS hash when it hands one over, else
 * vz_rss_hash_frame, the same Toeplitz hash in software), asks the policy
 * (dispatch/dispatch.c) for a worker and passes the mbuf on an rte_ring.
 * Worker lcores run the NF on the mbuf in place and hand the verdict back on
 * a second ring; the dispatcher sends or frees the mbuf. So every port
 * queue keeps one user (DPDK's queues are not thread-safe), and every mbuf
 * is allocated and freed on the dispatcher's lcore: no worker's mempool
 * cache hoards mbufs of a pool sized for one lcore.
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

#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "common/clock.h"
#include "dispatch/dispatcher.h"
#include "dispatch/dispatch.h"
#include "dispatch/park.h"
#include "dispatch/report.h"
#include "dispatch/toeplitz.h"
#include "dpdk/dpdk.h"
#include "runtime/capture.h"

#define JOB_RING 4096 /* ring slots per worker and way, a power of two */
#define IDLE_SPINS 256 /* empty polls before a lcore yields its CPU */
#define PUBLISH_NS 1000000 /* stats snapshot for the counting thread */
#define TAP_POLL_EVERY 64

/* A frame, from the dispatcher to a worker... */
struct job {
	struct rte_mbuf *m;
	__u32 port; /* received on */
	__u32 pad;
	struct vz_dispatch_ticket ticket;
};

/* ... and back, after the NF. */
struct result {
	struct rte_mbuf *m; /* set to the NF's output; free it if out < 0 */
	__s32 out; /* port to send it from; -1: free it */
	__u32 pad;
	struct vz_dispatch_ticket ticket;
};

/* rte_ring's elements are a multiple of 4 bytes. */
_Static_assert(sizeof(struct job) % 4 == 0, "job size");
_Static_assert(sizeof(struct result) % 4 == 0, "result size");

struct nf_worker {
	unsigned int id;
	struct vz_dpdk_dispatch *ds;
	struct worker *lc; /* dpdk.c's: the lcore, its CPU */
	struct rte_ring *jobs, *results;
	int sleeping; /* futex word: 1 while parked */
	/*
	 * The dispatcher's: when each job was queued, by its number. The
	 * oldest waiting job is number pushed - rte_ring_count(jobs); the
	 * ring holds fewer than JOB_RING, so its stamp is still here.
	 */
	__u64 pushed;
	__u64 stamp[JOB_RING];
	/* Jobs of the receive burst at hand, for one enqueue. */
	unsigned int staged;
	struct job stage[VZ_US_BATCH_MAX];
};

struct vz_dpdk_dispatch {
	struct vz_us_run *run;
	struct dpdk *d;
	struct worker *owner; /* the dispatcher's lcore: queues, tx batches */
	struct vz_dispatcher core; /* policy, allocator, report */
	struct nf_worker workers[VZ_MAX_WORKERS];
};

static void wake(struct nf_worker *w)
{
	vz_park_wake(&w->sleeping);
}

/* ---- workers ---------------------------------------------------------------
 */

static void run_job(struct nf_worker *nw, const struct job *j, struct result *r)
{
	struct vz_us_run *run = nw->ds->run;
	struct vz_worker_counters *c = &run->counters[nw->id];
	__u8 *data = rte_pktmbuf_mtod(j->m, __u8 *);
	struct vz_ctx ctx = {
		.data = data,
		.data_end = data + j->m->data_len,
		.data_hard_start = data - VZ_HEADROOM,
		.ingress_port = j->port,
	};

	*r = (struct result){ .m = j->m, .ticket = j->ticket };
	/* veloz dump: a job is one frame, so the switch is read per frame */
	r->out = vz_us_out_port(
		vz_us_process_cap(run, &ctx, c, vz_capture_burst(), nw->id),
		&ctx);
	if (r->out < 0)
		return;
	if (unlikely(r->out >= run->nports ||
		     set_frame(j->m, ctx.data, ctx.data_end))) {
		c->tx_failed++;
		r->out = -1;
	}
}

/*
 * Verdicts back to the dispatcher, which empties this ring every loop. Once
 * it has stopped, what finds no room is freed here.
 */
static void hand_back(struct nf_worker *nw, struct result *results,
		      unsigned int n)
{
	unsigned int sent = 0;

	for (;;) {
		sent += rte_ring_enqueue_burst_elem(nw->results, results + sent,
						    sizeof(*results), n - sent,
						    NULL);
		if (sent == n)
			return;
		if (__atomic_load_n(&nw->ds->core.dispatcher_done,
				    __ATOMIC_ACQUIRE))
			break;
		sched_yield();
	}
	for (; sent < n; sent++)
		rte_pktmbuf_free(results[sent].m);
}

/*
 * A worker stops after the dispatcher, with its ring empty: every frame
 * the dispatcher handed over is run, so the frames the policy counted are
 * the NF's, less those its full ring refused (ring_full), exactly.
 */
static int worker_main(void *arg)
{
	struct nf_worker *nw = arg;
	struct vz_us_run *run = nw->ds->run;
	struct job jobs[VZ_US_BATCH_MAX];
	struct result results[VZ_US_BATCH_MAX];
	unsigned int idle = 0, n, i;
	bool last;

	vz_us_worker_enter(nw->id);
	for (;;) {
		/* read before the ring: its last frames came before this */
		last = __atomic_load_n(&nw->ds->core.dispatcher_done,
				       __ATOMIC_ACQUIRE);
		n = rte_ring_dequeue_burst_elem(nw->jobs, jobs, sizeof(*jobs),
						run->batch, NULL);
		if (n) {
			for (i = 0; i < n; i++) {
				if (i + 1 < n)
					rte_prefetch0(rte_pktmbuf_mtod(
						jobs[i + 1].m, void *));
				run_job(nw, &jobs[i], &results[i]);
			}
			hand_back(nw, results, n);
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
		if (!rte_ring_count(nw->jobs) &&
		    nw->id >= __atomic_load_n(&nw->ds->core.active,
					      __ATOMIC_ACQUIRE))
			vz_park_wait(&nw->sleeping);
		__atomic_store_n(&nw->sleeping, 0, __ATOMIC_SEQ_CST);
	}
	return 0;
}

/* ---- the dispatcher --------------------------------------------------------
 */

/* The jobs of this burst for one worker onto its ring; the rest dropped. */
static void flush_stage(struct vz_dpdk_dispatch *ds, struct nf_worker *nw,
			__u64 now)
{
	unsigned int n, i;

	n = rte_ring_enqueue_burst_elem(nw->jobs, nw->stage, sizeof(*nw->stage),
					nw->staged, NULL);
	for (i = 0; i < n; i++)
		nw->stamp[(nw->pushed + i) & (JOB_RING - 1)] = now;
	nw->pushed += n;
	for (i = n; i < nw->staged; i++) {
		vz_dispatch_cancel(ds->core.policy, nw->id,
				   &nw->stage[i].ticket);
		ds->core.ring_full++;
		rte_pktmbuf_free(nw->stage[i].m);
	}
	nw->staged = 0;
	if (n)
		wake(nw); /* a parked worker keeping busy flows */
}

/* One burst from port p's queue q: returns the frames received. */
static uint16_t dispatch_rx(struct vz_dpdk_dispatch *ds, int p, uint16_t q,
			    __u64 now)
{
	struct vz_us_run *run = ds->run;
	struct vz_worker_counters *c = &run->dispatcher_counters;
	struct rte_mbuf *pkts[VZ_US_BATCH_MAX];
	bool touched[VZ_DISPATCH_MAX_WORKERS] = { false };
	uint16_t n, i;
	unsigned int w;

	n = rte_eth_rx_burst(ds->d->ports[p].id, q, pkts, (uint16_t)run->batch);
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct job j = { .m = m, .port = (__u32)p };
		struct nf_worker *nw;
		__u32 hash;

		if (!rx_valid(m, c))
			continue;
		hash = m->ol_flags & RTE_MBUF_F_RX_RSS_HASH
			       ? m->hash.rss
			       : vz_rss_hash_frame(rte_pktmbuf_mtod(m, void *),
						   m->data_len);
		/* a stage per worker, in arrival order: flows stay in order */
		w = vz_dispatch_pick(ds->core.policy, hash, now, &j.ticket);
		nw = &ds->workers[w];
		nw->stage[nw->staged++] = j;
		touched[w] = true;
	}
	for (w = 0; n && w < ds->core.nworkers; w++)
		if (touched[w])
			flush_stage(ds, &ds->workers[w], now);
	return n;
}

/* Verdicts back: sent on the dispatcher's first queue, or freed. */
static unsigned int collect_results(struct vz_dpdk_dispatch *ds)
{
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;
	struct result r[VZ_US_BATCH_MAX];
	struct rte_mbuf *dead[VZ_US_BATCH_MAX];
	unsigned int i, k, n, ndead, total = 0;

	for (i = 0; i < ds->core.nworkers; i++) {
		n = rte_ring_dequeue_burst_elem(ds->workers[i].results, r,
						sizeof(*r), VZ_US_BATCH_MAX,
						NULL);
		ndead = 0;
		for (k = 0; k < n; k++) {
			vz_dispatch_done(ds->core.policy, i, &r[k].ticket);
			if (r[k].out < 0)
				dead[ndead++] = r[k].m;
			else
				queue_tx(w, r[k].out, w->queue[0], r[k].m, c);
		}
		if (ndead)
			rte_pktmbuf_free_bulk(dead, ndead);
		total += n;
	}
	return total;
}

/* The allocator's view: when each worker's oldest waiting frame came. */
static void allocate(struct vz_dpdk_dispatch *ds, __u64 now)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int i, before = ds->core.active, after, waiting;

	for (i = 0; i < before; i++) {
		struct nf_worker *nw = &ds->workers[i];

		waiting = rte_ring_count(nw->jobs);
		if (waiting)
			oldest[i] = nw->stamp[(nw->pushed - waiting) &
					      (JOB_RING - 1)];
	}
	vz_dispatcher_allocate(&ds->core, now, oldest);
	after = ds->core.active;
	for (i = before; i < after; i++)
		wake(&ds->workers[i]);
}

static int dispatcher_main(void *arg)
{
	struct vz_dpdk_dispatch *ds = arg;
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
				work += dispatch_rx(ds, p, w->queue[q], now);
		work += collect_results(ds);
		flush_all(w, w->queue[0], c);
		/*
		 * Idle: let a worker that shares this CPU run (with fewer CPUs
		 * than lcores it otherwise waits for the scheduler to preempt
		 * a spinning dispatcher: milliseconds).
		 */
		if (work)
			idle = 0;
		else if (++idle % IDLE_SPINS == 0)
			sched_yield();
		if (++loops % TAP_POLL_EVERY == 0)
			dpdk_drain_taps(w, w->queue[0], c);
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
	if (w->spare) {
		rte_pktmbuf_free(w->spare);
		w->spare = NULL;
	}
	return 0;
}

/* ---- setup, start, stop ----------------------------------------------------
 */

void dpdk_dispatch_port_conf(const struct rte_eth_dev_info *info,
			     struct rte_eth_conf *conf)
{
	__u64 hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
		   info->flow_type_rss_offloads;

	if (!(info->rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH) || !hf)
		return; /* hashed in software, as on net_af_xdp */
	conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	conf->rxmode.offloads |= RTE_ETH_RX_OFFLOAD_RSS_HASH;
	conf->rx_adv_conf.rss_conf.rss_hf = hf;
	/* Microsoft's key, as in software: a flow hashes alike everywhere. */
	if (info->hash_key_size == VZ_RSS_KEY_LEN) {
		conf->rx_adv_conf.rss_conf.rss_key = (uint8_t *)vz_rss_key;
		conf->rx_adv_conf.rss_conf.rss_key_len = VZ_RSS_KEY_LEN;
	}
}

size_t dpdk_dispatch_memory(const struct vz_us_run *run)
{
	ssize_t jobs = rte_ring_get_memsize_elem(sizeof(struct job), JOB_RING);
	ssize_t results =
		rte_ring_get_memsize_elem(sizeof(struct result), JOB_RING);

	if (run->dispatch < 0 || jobs < 0 || results < 0)
		return 0;
	/* each ring a memzone, rounded to a cache line, and its header */
	return run->workers * ((size_t)jobs + (size_t)results + 2 * 4096);
}

int dpdk_dispatch_setup(struct vz_us_run *run, struct dpdk *d)
{
	struct vz_dpdk_dispatch *ds = calloc(1, sizeof(*ds));
	char name[RTE_RING_NAMESIZE];
	unsigned int i;

	if (!ds)
		return -ENOMEM;
	d->dispatch = ds;
	ds->run = run;
	ds->d = d;
	ds->owner = &d->dispatcher;
	if (vz_dispatcher_init(&ds->core,
			       (enum vz_dispatch_policy)run->dispatch,
			       run->workers, run->alloc))
		return -EINVAL;
	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];
		int socket = rte_lcore_to_socket_id(d->workers[i].lcore);

		nw->id = i;
		nw->ds = ds;
		nw->lc = &d->workers[i];
		snprintf(name, sizeof(name), "vz_jobs_%u", i);
		nw->jobs = rte_ring_create_elem(name, sizeof(struct job),
						JOB_RING, socket,
						RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "vz_done_%u", i);
		nw->results = rte_ring_create_elem(
			name, sizeof(struct result), JOB_RING, socket,
			RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (!nw->jobs || !nw->results) {
			vz_err("cannot allocate the dispatch rings: %s",
			       rte_strerror(rte_errno));
			return -ENOMEM;
		}
	}
	return 0;
}

int dpdk_dispatch_start(struct vz_us_run *run, struct dpdk *d)
{
	struct vz_dpdk_dispatch *ds = d->dispatch;
	unsigned int i;
	int ret;

	for (i = 0; i < ds->core.nworkers; i++) {
		struct worker *lc = ds->workers[i].lc;

		ret = rte_eal_remote_launch(worker_main, &ds->workers[i],
					    lc->lcore);
		if (ret) {
			vz_err("cannot start worker %u on lcore %u: %s", i,
			       lc->lcore, strerror(-ret));
			return ret;
		}
		lc->launched = true;
	}
	ret = rte_eal_remote_launch(dispatcher_main, ds, ds->owner->lcore);
	if (ret) {
		vz_err("cannot start the dispatcher on lcore %u: %s",
		       ds->owner->lcore, strerror(-ret));
		return ret;
	}
	ds->owner->launched = true;
	(void)run;
	return 0;
}

/*
 * The dispatcher first: it stops, then no worker is woken any more, and the
 * workers run what their rings still hold.
 */
void dpdk_dispatch_join(struct vz_us_run *run, struct dpdk *d)
{
	struct vz_dpdk_dispatch *ds = d->dispatch;
	unsigned int i;

	(void)run;
	if (ds->owner->launched) {
		rte_eal_wait_lcore(ds->owner->lcore);
		ds->owner->launched = false;
	}
	/* also when it never started: then no worker waits for it */
	__atomic_store_n(&ds->core.dispatcher_done, true, __ATOMIC_RELEASE);
	for (i = 0; i < ds->core.nworkers; i++)
		if (ds->workers[i].lc->launched) {
			wake(&ds->workers[i]);
			rte_eal_wait_lcore(ds->workers[i].lc->lcore);
			ds->workers[i].lc->launched = false;
		}
}

static void drain_ring(struct rte_ring *r, size_t esize)
{
	/* job and result both begin with their mbuf */
	union {
		struct job j;
		struct result r;
	} e;

	while (rte_ring_dequeue_elem(r, &e, (unsigned int)esize) == 0)
		rte_pktmbuf_free(e.j.m);
}

void dpdk_dispatch_teardown(struct dpdk *d)
{
	struct vz_dpdk_dispatch *ds = d->dispatch;
	unsigned int i;

	if (!ds)
		return;
	for (i = 0; i < VZ_MAX_WORKERS; i++) {
		struct nf_worker *nw = &ds->workers[i];

		if (nw->jobs) {
			drain_ring(nw->jobs, sizeof(struct job));
			rte_ring_free(nw->jobs);
		}
		if (nw->results) {
			drain_ring(nw->results, sizeof(struct result));
			rte_ring_free(nw->results);
		}
	}
	vz_dispatch_free(ds->core.policy);
	vz_dispatch_report_destroy(&ds->core.report);
	free(ds);
	d->dispatch = NULL;
}

__u64 dpdk_dispatch_missed(struct dpdk *d)
{
	return d->dispatch
		       ? vz_dispatch_report_ring_full(&d->dispatch->core.report)
		       : 0;
}

void dpdk_dispatch_report(struct vz_us_run *run, double t, bool summary)
{
	struct dpdk *d = run->backend_state;

	if (d && d->dispatch)
		vz_dispatch_report_print(&d->dispatch->core.report, run->json,
					 t, summary);
}

/* The figures since the start, in each counters line (JSON only). */
void dpdk_dispatch_extra(const void *arg, FILE *f, bool json)
{
	const struct vz_us_run *run = arg;
	struct dpdk *d = run->backend_state;

	if (json && d && d->dispatch)
		vz_dispatch_report_json(&d->dispatch->core.report, f);
}
