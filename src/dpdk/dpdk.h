/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the dpdk backend (dpdk.c the backend, eal_args.c, hugepages.c,
 * ports.c, packet_path.c the plain worker loop) shares with
 * src/dpdk/dispatcher.c (--dispatch, the port operations of
 * src/dispatch/dispatcher.c: one lcore receives and sends, workers run
 * the NF): the backend's state, and the frame and transmit
 * helpers both loops use.
 */
#ifndef VZ_DPDK_DPDK_H
#define VZ_DPDK_DPDK_H

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "runner/userspace.h"

#define MAX_QUEUES_PER_WORKER 8
#define MAX_EAL_ARGS 512

struct vz_dpdk_dispatch;

enum pmd {
	PMD_AF_XDP,
	PMD_AF_PACKET,
	PMD_EAL, /* ports EAL probed from the user's arguments */
};

struct tx_batch {
	uint16_t n;
	struct rte_mbuf *m[VZ_US_BATCH_MAX];
};

struct dpdk;

struct worker {
	unsigned int id;
	unsigned int lcore;
	int cpu; /* -1: as the user's EAL arguments said */
	bool launched;
	struct vz_us_run *run;
	struct dpdk *d;
	unsigned int nqueues;
	uint16_t queue[MAX_QUEUES_PER_WORKER];
	struct rte_mbuf *spare; /* the next TAP frame goes here */
	struct tx_batch *tx; /* one per output port, for the queue at hand */
};

struct port {
	uint16_t id; /* DPDK port id */
	bool configured;
	bool started;
	char driver[32];
	struct rte_mempool *pool[VZ_MAX_WORKERS]; /* one per queue */
	int shield_prog; /* af_packet: tcx program and link, or -1 */
	int shield_link;
};

struct dpdk {
	enum pmd pmd;
	bool eal_up;
	double eal_seconds;
	char runtime_dir[PATH_MAX]; /* EAL's, removed at exit when empty */
	int nargs;
	char *args[MAX_EAL_ARGS];
	struct worker workers[VZ_MAX_WORKERS];
	struct port ports[VZ_MAX_PORTS];
	uint16_t data_room;
	unsigned int pool_mbufs;
	unsigned int ring_frame; /* af_packet: framesz= and blocksz=, or 0 */
	unsigned int ring_block;
	size_t mem_bytes; /* what the mempools and EAL need */
	unsigned long hp_added; /* nr_hugepages raised by this much */
	char hp_record[PATH_MAX];
	const char *xsk_mode; /* af_xdp: copy, zero-copy, mixed */
	bool shield_missing;
	char steer_path[PATH_MAX];
	/* --dispatch: the lcore that owns every queue, and the stage */
	struct worker dispatcher;
	struct vz_dpdk_dispatch *dispatch;
};

/* ---- frames -------------------------------------------------------------- */

/*
 * The lowest byte a frame may grow into: the start of the mbuf's private
 * area when it sits right before the buffer (always, in our mempools),
 * else the buffer itself (an external buffer attached by the PMD).
 */
static inline __u8 *frame_floor(const struct rte_mbuf *m)
{
	if (RTE_MBUF_HAS_EXTBUF(m))
		return m->buf_addr;
	return (__u8 *)m->buf_addr - m->priv_size;
}

/* Give the frame VZ_HEADROOM bytes before it: 0, or -1 if it cannot have. */
static inline int ensure_headroom(struct rte_mbuf *m)
{
	__u8 *data = rte_pktmbuf_mtod(m, __u8 *), *buf = m->buf_addr;
	__u8 *want = frame_floor(m) + VZ_HEADROOM;

	if (likely(data >= want))
		return 0;
	/* a PMD that put the data lower than usual: move it up */
	if (want + m->data_len > buf + m->buf_len)
		return -1;
	memmove(want, data, m->data_len);
	m->data_off = (uint16_t)(want - buf);
	return 0;
}

/*
 * Make the mbuf describe data .. end after the NF (head adjusted or not).
 * The NF may have grown the frame into the private area, in front of the
 * buffer: then it moves into the buffer. 0, or -1 if it does not fit.
 */
static inline int set_frame(struct rte_mbuf *m, __u8 *data, __u8 *end)
{
	__u8 *buf = m->buf_addr;
	size_t len = (size_t)(end - data);

	if (unlikely(data < buf)) {
		if (len > m->buf_len)
			return -1;
		memmove(buf, data, len);
		data = buf;
	}
	m->data_off = (uint16_t)(data - buf);
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	return 0;
}

/* A frame with the geometry the NF contract promises; else counted, freed. */
static inline bool rx_valid(struct rte_mbuf *m, struct vz_worker_counters *c)
{
	if (likely(m->nb_segs == 1 && m->data_len <= VZ_LINEAR_MAX &&
		   !ensure_headroom(m)))
		return true;
	c->rx++;
	c->rx_invalid++;
	rte_pktmbuf_free(m);
	return false;
}

/* ---- transmit ------------------------------------------------------------ */

static inline void flush_tx(struct worker *w, int p, uint16_t q,
			    struct vz_worker_counters *c)
{
	struct tx_batch *b = &w->tx[p];
	uint16_t sent, more, i;

	if (!b->n)
		return;
	sent = rte_eth_tx_burst(w->d->ports[p].id, q, b->m, b->n);
	if (unlikely(sent < b->n)) {
		/* the ring was full: once more, then the rest fails */
		more = rte_eth_tx_burst(w->d->ports[p].id, q, b->m + sent,
					(uint16_t)(b->n - sent));
		sent = (uint16_t)(sent + more);
		for (i = sent; i < b->n; i++) {
			rte_pktmbuf_free(b->m[i]);
			c->tx_failed++;
		}
	}
	b->n = 0;
}

static inline void flush_all(struct worker *w, uint16_t q,
			     struct vz_worker_counters *c)
{
	int p;

	for (p = 0; p < w->run->nports; p++)
		flush_tx(w, p, q, c);
}

static inline void queue_tx(struct worker *w, int p, uint16_t q,
			    struct rte_mbuf *m, struct vz_worker_counters *c)
{
	struct tx_batch *b = &w->tx[p];

	if (unlikely(b->n == VZ_US_BATCH_MAX))
		flush_tx(w, p, q, c);
	b->m[b->n++] = m;
}

/* What the kernel sent out of the TAPs goes out of their ports, on queue q. */
void dpdk_drain_taps(struct worker *w, uint16_t q,
		     struct vz_worker_counters *c);
/* packet_path.c: a worker lcore's loop without --dispatch (arg: its worker). */
int dpdk_worker_main(void *arg);

/*
 * src/dpdk/dispatcher.c: --dispatch. Setup after the ports are
 * started; start and join the dispatcher and worker lcores; teardown before
 * the ports stop (safe after a partial setup).
 */
int dpdk_dispatch_setup(struct vz_us_run *run, struct dpdk *d);
int dpdk_dispatch_start(struct vz_us_run *run, struct dpdk *d);
void dpdk_dispatch_join(struct vz_us_run *run, struct dpdk *d);
void dpdk_dispatch_teardown(struct dpdk *d);
/* An EAL port's configuration: the RSS hash of each frame, if it can. */
void dpdk_dispatch_port_conf(const struct rte_eth_dev_info *info,
			     struct rte_eth_conf *conf);
/* Bytes of EAL memory the dispatch rings take, for plan_memory(). */
size_t dpdk_dispatch_memory(const struct vz_us_run *run);
__u64 dpdk_dispatch_missed(struct dpdk *d);
void dpdk_dispatch_report(struct vz_us_run *run, double t, bool summary);
void dpdk_dispatch_extra(const void *run, FILE *f, bool json);

#endif
