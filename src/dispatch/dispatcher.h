/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The userspace dispatch stage (--dispatch on afxdp and dpdk), once for
 * both backends: one thread, the dispatcher, owns every port queue. It
 * takes each received frame, asks the policy (dispatch.c) for a worker and
 * passes the frame on a lock-free ring; workers run the NF in place and
 * hand the verdict back on a second ring; the dispatcher sends or frees the
 * frame. So every port queue keeps a single user, as AF_XDP and DPDK's
 * queues require, and frames are allocated and freed on one thread.
 * Calisto's IOKernel works the same way.
 *
 * With --alloc the core allocator (core_alloc.c) grows and shrinks the
 * active workers with queueing delay. A worker beyond the active ones
 * finishes what it holds and sleeps on a futex until woken (park.h):
 * parked workers cost no CPU.
 *
 * What the backends differ in is a table of operations (struct
 * vz_dispatch_ops): their rings, their ports, the NF on one of their
 * frames, their threads. The loops call it once per burst, never per
 * frame; src/afxdp/dispatcher.c and src/dpdk/dispatcher.c fill it.
 */
#ifndef VZ_DISPATCH_DISPATCHER_H
#define VZ_DISPATCH_DISPATCHER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"
#include "dispatch/report.h"

#define VZ_DISPATCH_RING 4096 /* frames queued per worker, a power of two */
#define VZ_DISPATCH_BURST 256 /* the most frames one receive burst brings */

/* A frame, from the dispatcher to a worker... */
struct vz_dispatch_job {
	__u64 frame; /* the backend's: a UMEM address, an mbuf */
	__u32 len;
	__u16 port, slot; /* received on: the port, the backend's queue slot */
	struct vz_dispatch_ticket ticket;
};

/* ... and back, after the NF. */
struct vz_dispatch_result {
	__u64 frame; /* the NF's output (its head may have moved) */
	__u32 len;
	__s16 out; /* port to send it from; -1: free it */
	__u16 slot;
	struct vz_dispatch_ticket ticket;
};

/* What one receive burst brought: the valid frames and their flow hashes. */
struct vz_dispatch_burst {
	unsigned int n;
	__u32 hash[VZ_DISPATCH_BURST];
	struct vz_dispatch_job job[VZ_DISPATCH_BURST];
};

/*
 * A worker's rings (its jobs, its results), each with one producer and one
 * consumer: up to n entries of `size` bytes in or out, how many; and how
 * many it holds now, from either side.
 */
struct vz_dispatch_ring_ops {
	unsigned int (*push)(void *ring, const void *entries, size_t size,
			     unsigned int n);
	unsigned int (*pop)(void *ring, void *entries, size_t size,
			    unsigned int n);
	unsigned int (*count)(void *ring);
};

/* Over spsc.h's rings, of entries of the size they were made with. */
extern const struct vz_dispatch_ring_ops vz_dispatch_spsc_ring;

/* A backend's part; `be` is the backend's state, given at init. */
struct vz_dispatch_ops {
	const struct vz_dispatch_ring_ops *ring;
	/*
	 * One burst from `port`'s queue slot `slot` into b (at most
	 * VZ_DISPATCH_BURST): the frames the NF may see, with their flow
	 * hashes; the others counted and freed. Returns the frames received.
	 */
	unsigned int (*rx)(void *be, unsigned int port, unsigned int slot,
			   struct vz_dispatch_burst *b);
	/* Frames a full ring refused: free them. */
	void (*drop)(void *be, const struct vz_dispatch_job *jobs,
		     unsigned int n);
	/* Verdicts: send each (out >= 0) or free it. */
	void (*tx)(void *be, const struct vz_dispatch_result *r,
		   unsigned int n);
	/* Once a loop, after the verdicts: transmit, the TAPs, the rings. */
	void (*service)(void *be);
	/* The dispatcher stops: what it alone holds, freed (or NULL). */
	void (*stopped)(void *be);
	/* A worker's: the NF on n jobs, a verdict each. */
	void (*run)(void *be, unsigned int worker,
		    const struct vz_dispatch_job *jobs,
		    struct vz_dispatch_result *r, unsigned int n);
	/*
	 * A worker's, once the dispatcher has stopped: verdicts its ring had
	 * no room for (NULL: they stay where they are, reclaimed at teardown).
	 */
	void (*discard)(void *be, const struct vz_dispatch_result *r,
			unsigned int n);
	/*
	 * Threads: start (0 or -errno, one line said) and wait for worker
	 * `who`, or the dispatcher (-1). The dispatcher's thread calls
	 * vz_dispatcher_run(), worker i's vz_dispatcher_work(). wait() is
	 * also called for threads that never started.
	 */
	int (*start)(void *be, int who);
	void (*wait)(void *be, int who);
	/* Verdicts taken from each worker per loop (at least 1). */
	unsigned int collect_budget;
};

struct vz_dispatcher_config {
	enum vz_dispatch_policy policy;
	unsigned int workers; /* 1..VZ_DISPATCH_MAX_WORKERS */
	bool alloc; /* the core allocator sets the active workers */
	unsigned int nports, nslots; /* rx polls each port's slots 0..n-1 */
	unsigned int batch; /* jobs a worker takes at once, 1..BURST */
	const volatile sig_atomic_t *stop; /* the run's: stop when set */
	const struct vz_dispatch_ops *ops;
	void *be;
};

struct vz_dispatcher;

struct vz_dispatcher_worker {
	struct vz_dispatcher *dc;
	unsigned int id;
	void *jobs, *results; /* the backend's rings */
	int sleeping; /* futex word: 1 while parked */
	/*
	 * The dispatcher's: when each job was queued, by its number. The
	 * oldest waiting job is number pushed - count(jobs); the ring holds
	 * at most VZ_DISPATCH_RING, so its stamp is still here.
	 */
	__u64 pushed;
	__u64 stamp[VZ_DISPATCH_RING];
	/* Jobs of the receive burst at hand, for one push. */
	unsigned int staged;
	struct vz_dispatch_job stage[VZ_DISPATCH_BURST];
};

struct vz_dispatcher {
	struct vz_dispatcher_config cfg;
	struct vz_dispatch *policy;
	struct vz_core_alloc alloc;
	unsigned int active; /* the policy's, for workers to read */
	unsigned int nworkers;
	__u64 ring_full; /* frames dropped: their worker's ring was full */
	__u64 active_ns; /* integral of active workers over time */
	__u64 start_ns;
	struct vz_dispatch_report report; /* what the counting thread reads */
	bool dispatcher_done; /* it has stopped: workers empty their rings */
	/* The dispatcher thread's scratch. */
	struct vz_dispatch_burst burst;
	struct vz_dispatch_result results[VZ_DISPATCH_BURST];
	struct vz_dispatcher_worker workers[VZ_DISPATCH_MAX_WORKERS];
};

/*
 * As cfg says; with cfg->alloc it starts from one active worker and grows
 * with the load. The backend then sets each worker's rings. 0, or -EINVAL.
 */
int vz_dispatcher_init(struct vz_dispatcher *dc,
		       const struct vz_dispatcher_config *cfg);
/* The policy and the report (safe after a failed init of a zeroed dc). */
void vz_dispatcher_destroy(struct vz_dispatcher *dc);

/* Start the workers, then the dispatcher: 0 or the first -errno. */
int vz_dispatcher_start(struct vz_dispatcher *dc);
/*
 * The dispatcher first: it stops (on cfg.stop), then no worker is woken
 * any more, and the workers run what their rings still hold.
 */
void vz_dispatcher_join(struct vz_dispatcher *dc);

/* The thread bodies, until cfg.stop (workers: and their rings empty). */
void vz_dispatcher_run(struct vz_dispatcher *dc);
void vz_dispatcher_work(struct vz_dispatcher_worker *w);

#endif
