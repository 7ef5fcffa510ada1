// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's part of the dispatch stage (--dispatch), whose loops
 * are src/dispatch/dispatcher.c's: the dispatcher lcore owns every port
 * queue. A job is an mbuf; the flow's hash is the port's RSS hash when it
 * hands one over, else vz_rss_hash_frame, the same Toeplitz hash in
 * software. Worker lcores run the NF on the mbuf in place, and the
 * dispatcher sends or frees it: so every port queue keeps one user (DPDK's
 * queues are not thread-safe), and every mbuf is allocated and freed on the
 * dispatcher's lcore: no worker's mempool cache hoards mbufs of a pool
 * sized for one lcore. The rings between them are rte_rings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "common/clock.h"
#include "dispatch/dispatcher.h"
#include "dispatch/report.h"
#include "dispatch/toeplitz.h"
#include "dpdk/dpdk.h"

#define TAP_POLL_EVERY 64

/* rte_ring's elements are a multiple of 4 bytes. */
_Static_assert(sizeof(struct vz_dispatch_job) % 4 == 0, "job size");
_Static_assert(sizeof(struct vz_dispatch_result) % 4 == 0, "result size");
_Static_assert(VZ_US_BATCH_MAX <= VZ_DISPATCH_BURST, "a burst fits");

/* A worker's lcore and rings. */
struct nf_worker {
	struct worker *lc; /* dpdk.c's: the lcore, its CPU */
	struct rte_ring *jobs, *results;
};

struct vz_dpdk_dispatch {
	struct vz_us_run *run;
	struct dpdk *d;
	struct worker *owner; /* the dispatcher's lcore: queues, tx batches */
	unsigned long loops;
	struct nf_worker workers[VZ_MAX_WORKERS];
	struct vz_dispatcher core; /* the loops, policy, allocator, report */
};

static inline struct rte_mbuf *mbuf(__u64 frame)
{
	return (struct rte_mbuf *)(uintptr_t)frame;
}

/* ---- rings -----------------------------------------------------------------
 */

static unsigned int ring_push(void *ring, const void *entries, size_t size,
			      unsigned int n)
{
	return rte_ring_enqueue_burst_elem(ring, entries, (unsigned int)size, n,
					   NULL);
}

static unsigned int ring_pop(void *ring, void *entries, size_t size,
			     unsigned int n)
{
	return rte_ring_dequeue_burst_elem(ring, entries, (unsigned int)size, n,
					   NULL);
}

static unsigned int ring_count(void *ring)
{
	return rte_ring_count(ring);
}

static const struct vz_dispatch_ring_ops rte_ring_ops = {
	.push = ring_push,
	.pop = ring_pop,
	.count = ring_count,
};

/* ---- the dispatcher's ports ------------------------------------------------
 */

static unsigned int rx(void *be, unsigned int port, unsigned int slot,
		       struct vz_dispatch_burst *b)
{
	struct vz_dpdk_dispatch *ds = be;
	struct vz_us_run *run = ds->run;
	struct vz_worker_counters *c = &run->dispatcher_counters;
	struct rte_mbuf *pkts[VZ_US_BATCH_MAX];
	uint16_t n, i;

	n = rte_eth_rx_burst(ds->d->ports[port].id, ds->owner->queue[slot],
			     pkts, (uint16_t)run->batch);
	b->n = 0;
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (!rx_valid(m, c))
			continue;
		b->job[b->n] = (struct vz_dispatch_job){
			.frame = (__u64)(uintptr_t)m,
			.len = m->data_len,
			.port = (__u16)port,
			.slot = (__u16)slot,
		};
		b->hash[b->n++] =
			m->ol_flags & RTE_MBUF_F_RX_RSS_HASH
				? m->hash.rss
				: vz_rss_hash_frame(rte_pktmbuf_mtod(m, void *),
						    m->data_len);
	}
	return n;
}

static void drop(void *be, const struct vz_dispatch_job *jobs, unsigned int n)
{
	unsigned int i;

	(void)be;
	for (i = 0; i < n; i++)
		rte_pktmbuf_free(mbuf(jobs[i].frame));
}

/* Sent on the dispatcher's first queue, or freed. */
static void tx(void *be, const struct vz_dispatch_result *r, unsigned int n)
{
	struct vz_dpdk_dispatch *ds = be;
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;
	struct rte_mbuf *dead[VZ_DISPATCH_BURST];
	unsigned int i, ndead = 0;

	for (i = 0; i < n; i++) {
		if (r[i].out < 0)
			dead[ndead++] = mbuf(r[i].frame);
		else
			queue_tx(w, r[i].out, w->queue[0], mbuf(r[i].frame), c);
	}
	if (ndead)
		rte_pktmbuf_free_bulk(dead, ndead);
}

static void service(void *be)
{
	struct vz_dpdk_dispatch *ds = be;
	struct worker *w = ds->owner;
	struct vz_worker_counters *c = &ds->run->dispatcher_counters;

	flush_all(w, w->queue[0], c);
	if (++ds->loops % TAP_POLL_EVERY == 0)
		dpdk_drain_taps(w, w->queue[0], c);
}

static void stopped(void *be)
{
	struct vz_dpdk_dispatch *ds = be;

	if (ds->owner->spare) {
		rte_pktmbuf_free(ds->owner->spare);
		ds->owner->spare = NULL;
	}
}

/* ---- workers ---------------------------------------------------------------
 */

static void run_job(struct vz_dpdk_dispatch *ds, unsigned int id,
		    const struct vz_dispatch_job *j,
		    struct vz_dispatch_result *r)
{
	struct vz_us_run *run = ds->run;
	struct vz_worker_counters *c = &run->counters[id];
	struct rte_mbuf *m = mbuf(j->frame);
	__u8 *data = rte_pktmbuf_mtod(m, __u8 *);
	struct vz_ctx ctx = {
		.data = data,
		.data_end = data + m->data_len,
		.data_hard_start = data - VZ_HEADROOM,
		.ingress_port = j->port,
	};

	*r = (struct vz_dispatch_result){ .frame = j->frame,
					  .ticket = j->ticket };
	/* veloz dump: a job is one frame, so the switch is read per frame */
	r->out = (__s16)vz_us_out_port(
		vz_us_process_cap(run, &ctx, c, vz_capture_burst(), id), &ctx);
	if (r->out < 0)
		return;
	if (unlikely(r->out >= run->nports ||
		     set_frame(m, ctx.data, ctx.data_end))) {
		c->tx_failed++;
		r->out = -1;
	}
}

static void run_jobs(void *be, unsigned int id,
		     const struct vz_dispatch_job *jobs,
		     struct vz_dispatch_result *r, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(mbuf(jobs[i + 1].frame),
						       void *));
		run_job(be, id, &jobs[i], &r[i]);
	}
}

/* Verdicts the stopped dispatcher will not take. */
static void discard(void *be, const struct vz_dispatch_result *r,
		    unsigned int n)
{
	unsigned int i;

	(void)be;
	for (i = 0; i < n; i++)
		rte_pktmbuf_free(mbuf(r[i].frame));
}

/* ---- lcores ----------------------------------------------------------------
 */

static int worker_main(void *arg)
{
	struct vz_dispatcher_worker *w = arg;

	vz_us_worker_enter(w->id);
	vz_dispatcher_work(w);
	return 0;
}

static int dispatcher_main(void *arg)
{
	vz_dispatcher_run(arg);
	return 0;
}

static struct worker *lcore_of(struct vz_dpdk_dispatch *ds, int who)
{
	return who < 0 ? ds->owner : ds->workers[who].lc;
}

static int start(void *be, int who)
{
	struct vz_dpdk_dispatch *ds = be;
	struct worker *lc = lcore_of(ds, who);
	int ret;

	if (who < 0)
		ret = rte_eal_remote_launch(dispatcher_main, &ds->core,
					    lc->lcore);
	else
		ret = rte_eal_remote_launch(worker_main, &ds->core.workers[who],
					    lc->lcore);
	if (ret) {
		if (who < 0)
			vz_err("cannot start the dispatcher on lcore %u: %s",
			       lc->lcore, strerror(-ret));
		else
			vz_err("cannot start worker %d on lcore %u: %s", who,
			       lc->lcore, strerror(-ret));
		return ret;
	}
	lc->launched = true;
	return 0;
}

static void wait_for(void *be, int who)
{
	struct worker *lc = lcore_of(be, who);

	if (lc->launched) {
		rte_eal_wait_lcore(lc->lcore);
		lc->launched = false;
	}
}

static const struct vz_dispatch_ops dpdk_dispatch_ops = {
	.ring = &rte_ring_ops,
	.rx = rx,
	.drop = drop,
	.tx = tx,
	.service = service,
	.stopped = stopped,
	.run = run_jobs,
	.discard = discard,
	.start = start,
	.wait = wait_for,
	.collect_budget = VZ_DISPATCH_BURST,
};

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
	ssize_t jobs = rte_ring_get_memsize_elem(sizeof(struct vz_dispatch_job),
						 VZ_DISPATCH_RING);
	ssize_t results = rte_ring_get_memsize_elem(
		sizeof(struct vz_dispatch_result), VZ_DISPATCH_RING);

	if (run->dispatch < 0 || jobs < 0 || results < 0)
		return 0;
	/* each ring a memzone, rounded to a cache line, and its header */
	return run->workers * ((size_t)jobs + (size_t)results + 2 * 4096);
}

int dpdk_dispatch_setup(struct vz_us_run *run, struct dpdk *d)
{
	struct vz_dpdk_dispatch *ds = calloc(1, sizeof(*ds));
	struct vz_dispatcher_config cfg = {
		.policy = (enum vz_dispatch_policy)run->dispatch,
		.workers = run->workers,
		.alloc = run->alloc,
		.nports = (unsigned int)run->nports,
		.nslots = d->dispatcher.nqueues,
		.batch = run->batch,
		.stop = &run->stop,
		.ops = &dpdk_dispatch_ops,
	};
	char name[RTE_RING_NAMESIZE];
	unsigned int i;

	if (!ds)
		return -ENOMEM;
	d->dispatch = ds;
	ds->run = run;
	ds->d = d;
	ds->owner = &d->dispatcher;
	cfg.be = ds;
	if (vz_dispatcher_init(&ds->core, &cfg))
		return -EINVAL;
	for (i = 0; i < ds->core.nworkers; i++) {
		struct nf_worker *nw = &ds->workers[i];
		int socket = rte_lcore_to_socket_id(d->workers[i].lcore);

		nw->lc = &d->workers[i];
		snprintf(name, sizeof(name), "vz_jobs_%u", i);
		nw->jobs = rte_ring_create_elem(
			name, sizeof(struct vz_dispatch_job), VZ_DISPATCH_RING,
			socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "vz_done_%u", i);
		nw->results = rte_ring_create_elem(
			name, sizeof(struct vz_dispatch_result),
			VZ_DISPATCH_RING, socket,
			RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (!nw->jobs || !nw->results) {
			vz_err("cannot allocate the dispatch rings: %s",
			       rte_strerror(rte_errno));
			return -ENOMEM;
		}
		ds->core.workers[i].jobs = nw->jobs;
		ds->core.workers[i].results = nw->results;
	}
	return 0;
}

int dpdk_dispatch_start(struct vz_us_run *run, struct dpdk *d)
{
	(void)run;
	return vz_dispatcher_start(&d->dispatch->core);
}

void dpdk_dispatch_join(struct vz_us_run *run, struct dpdk *d)
{
	(void)run;
	vz_dispatcher_join(&d->dispatch->core);
}

static void drain_ring(struct rte_ring *r, size_t esize)
{
	/* job and result both begin with their mbuf */
	union {
		struct vz_dispatch_job j;
		struct vz_dispatch_result r;
	} e;

	while (rte_ring_dequeue_elem(r, &e, (unsigned int)esize) == 0)
		rte_pktmbuf_free(mbuf(e.j.frame));
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
			drain_ring(nw->jobs, sizeof(struct vz_dispatch_job));
			rte_ring_free(nw->jobs);
		}
		if (nw->results) {
			drain_ring(nw->results,
				   sizeof(struct vz_dispatch_result));
			rte_ring_free(nw->results);
		}
	}
	vz_dispatcher_destroy(&ds->core);
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
