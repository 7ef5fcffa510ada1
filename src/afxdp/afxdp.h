/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What afxdp.c (sockets, UMEM, the plain worker loop) shares with
 * src/afxdp/dispatcher.c (the port operations of the dispatch stage,
 * src/dispatch/dispatcher.c: one thread receives and sends, workers run
 * the NF).
 */
#ifndef VZ_AFXDP_AFXDP_H
#define VZ_AFXDP_AFXDP_H

#include <pthread.h>
#include <stdbool.h>
#include <linux/if_xdp.h>

#include <xdp/xsk.h>

#include "runner/userspace.h"

struct vz_afxdp_dispatch;

#define FRAME_SIZE 4096u
/*
 * Every ring: rx, tx, fill, completion. A worker busy-polls a CPU the
 * scheduler may give to another task until its next tick (4 ms at HZ=250):
 * the rx and fill rings must hold more than a tick of frames at the rates
 * a port is run at (4096 frames: 8 ms at 500 kpps of 64 B).
 */
#define RING_SIZE 4096u
#define MAX_QUEUES_PER_WORKER 8
/* frames per socket: its fill ring, its rx ring and its share of tx */
#define FRAMES_PER_SOCKET (2 * RING_SIZE)
#define TAP_POLL_EVERY 64 /* loop iterations between looks at the TAPs */
#define TX_STALLS 64 /* kicks in a row that free no TX ring slot */

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

struct xsk {
	struct xsk_socket *socket;
	int fd;
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	__u32 tx_outstanding; /* sent, completion not seen yet */
	bool tx_kick; /* descriptors submitted since the last sendto() */
	/* TX descriptors gathered during one receive burst */
	__u32 pending;
	struct xdp_desc pending_desc[VZ_US_BATCH_MAX];
};

struct worker {
	unsigned int id;
	struct vz_us_run *run;
	pthread_t thread;
	bool running;
	void *area;
	size_t area_size;
	struct xsk_umem *umem;
	__u64 *free_frames; /* a stack of frame addresses */
	__u32 nfree;
	unsigned int nqueues;
	unsigned int queue[MAX_QUEUES_PER_WORKER];
	struct xsk *xsk[VZ_MAX_PORTS][MAX_QUEUES_PER_WORKER];
};

struct afxdp {
	struct worker workers[VZ_MAX_WORKERS];
	struct xdp_program *steer[VZ_MAX_PORTS];
	bool zero_copy;
	struct vz_afxdp_dispatch *dispatch; /* --dispatch: the stage's state */
};

static inline void afxdp_frame_free(struct worker *w, __u64 addr)
{
	w->free_frames[w->nfree++] = addr & ~(__u64)(FRAME_SIZE - 1);
}

/* A receive burst's descriptors; 0, and a wakeup if needed, when none. */
__u32 afxdp_rx_peek(struct vz_us_run *run, struct xsk *x, __u32 *idx);
/* A frame with the NF's geometry; else counted invalid and freed. */
bool afxdp_rx_valid(struct worker *w, const struct xdp_desc *d,
		    struct vz_worker_counters *c);
void afxdp_refill(struct worker *w, struct xsk *x);
void afxdp_complete(struct worker *w, struct xsk *x);
void afxdp_kick_tx(struct xsk *x);
void afxdp_flush_tx(struct worker *w, struct xsk *x,
		    struct vz_worker_counters *c);
void afxdp_queue_tx(struct worker *w, struct xsk *x, __u64 addr, __u32 len,
		    struct vz_worker_counters *c);
void afxdp_drain_taps(struct worker *w, struct vz_worker_counters *c);
void afxdp_service_rings(struct worker *w, struct vz_worker_counters *c);
/* A worker thread's body: the rx loop (packet_path.c). */
void *afxdp_worker_main(void *arg);
/* A thread on one CPU; one line and -errno if it cannot start. */
int afxdp_start_thread(pthread_t *thread, void *(*fn)(void *), void *arg,
		       int cpu, const char *what, unsigned int id);

/* src/afxdp/dispatcher.c: --dispatch. Setup after the sockets;
 * start; stop. */
int afxdp_dispatch_setup(struct vz_us_run *run, struct afxdp *a);
int afxdp_dispatch_start(struct vz_us_run *run, struct afxdp *a);
void afxdp_dispatch_join(struct vz_us_run *run, struct afxdp *a);
void afxdp_dispatch_teardown(struct afxdp *a);
__u64 afxdp_dispatch_missed(struct afxdp *a);
void afxdp_dispatch_report(struct vz_us_run *run, double t, bool summary);
void afxdp_dispatch_extra(const void *run, FILE *f, bool json);

#endif
