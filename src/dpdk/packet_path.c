// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's packet path, without --dispatch: each worker lcore
 * polls its queues of every port, runs the NF on each frame and queues the
 * verdict's frames for transmit (the frame and transmit helpers are in
 * dpdk.h, shared with src/dpdk/dispatcher.c). Worker 0 also sends
 * out what the kernel wrote into the TAPs.
 */
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "dpdk/dpdk.h"
#include "runner/userspace.h"

#define TAP_POLL_EVERY 64 /* loop iterations between looks at the TAPs */
#define TAP_BUDGET 32 /* frames taken from a TAP at a time */

/* One burst from port p's queue q: returns the frames received. */
static uint16_t poll_rx(struct worker *w, int p, uint16_t q,
			struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	struct rte_mbuf *pkts[VZ_US_BATCH_MAX];
	uint16_t n, i;
	int action, out, cap;

	n = rte_eth_rx_burst(w->d->ports[p].id, q, pkts, (uint16_t)run->batch);
	cap = n ? vz_capture_burst() : -1; /* veloz dump: once per burst */
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct vz_ctx ctx;
		__u8 *data;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		if (!rx_valid(m, c))
			continue;
		data = rte_pktmbuf_mtod(m, __u8 *);
		ctx = (struct vz_ctx){
			.data = data,
			.data_end = data + m->data_len,
			.data_hard_start = data - VZ_HEADROOM,
			.ingress_port = (__u32)p,
		};
		action = vz_us_process_cap(run, &ctx, c, cap, w->id);
		if (action == VZ_TX)
			out = p;
		else if (action == VZ_REDIRECT_VERDICT)
			out = (int)ctx.redirect_port;
		else
			out = -1;
		if (out < 0) {
			rte_pktmbuf_free(m);
			continue;
		}
		if (unlikely(out >= run->nports ||
			     set_frame(m, ctx.data, ctx.data_end))) {
			c->tx_failed++;
			rte_pktmbuf_free(m);
			continue;
		}
		queue_tx(w, out, q, m, c);
	}
	return n;
}

void dpdk_drain_taps(struct worker *w, uint16_t q, struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	struct rte_mbuf *m;
	size_t len;
	int p, budget;

	for (p = 0; p < run->nports; p++) {
		for (budget = TAP_BUDGET; budget; budget--) {
			m = w->spare;
			if (!m) {
				m = rte_pktmbuf_alloc(w->d->ports[p].pool[q]);
				if (!m)
					break;
			}
			len = vz_tap_recv(&run->ports[p].tap,
					  rte_pktmbuf_mtod(m, void *),
					  rte_pktmbuf_tailroom(m));
			if (!len) {
				w->spare = m;
				break;
			}
			w->spare = NULL;
			m->data_len = (uint16_t)len;
			m->pkt_len = (uint32_t)len;
			c->from_kernel++;
			queue_tx(w, p, q, m, c);
		}
	}
	flush_all(w, q, c);
}

int dpdk_worker_main(void *arg)
{
	struct worker *w = arg;
	struct vz_us_run *run = w->run;
	struct vz_worker_counters *c = &run->counters[w->id];
	unsigned long loops = 0;
	unsigned int i;
	int p;

	vz_us_worker_enter(w->id);
	while (!run->stop) {
		vz_us_pause_point(run);
		for (i = 0; i < w->nqueues; i++) {
			for (p = 0; p < run->nports; p++)
				poll_rx(w, p, w->queue[i], c);
			flush_all(w, w->queue[i], c);
		}
		if (w->id == 0 && ++loops % TAP_POLL_EVERY == 0)
			dpdk_drain_taps(w, w->queue[0], c);
	}
	if (w->spare) {
		rte_pktmbuf_free(w->spare);
		w->spare = NULL;
	}
	return 0;
}
