/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the parts of vz-sim share: the model's state (workers and their
 * FIFOs, the dispatcher as a server, the event heap), the trace, the
 * per-step results, and each part's entry points.
 *
 *   hist.c      latency histograms
 *   queues.c    the FIFOs of frames and the event heap
 *   workload.c  the trace: flows, arrivals, service times
 *   model.c     the queueing model: arrivals, hand-offs, service, wake-ups
 *   driver.c    the policy code driven over time (ticks, the core
 *               allocator, steps) and the event loop
 *   output.c    the report (JSON or a table) and the timeline
 *   vz-sim.c    options and main
 */
#ifndef VZ_DISPATCH_SIM_SIM_H
#define VZ_DISPATCH_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"
#include "dispatch/sim/opts.h"

#define TICK_NS 1000ull
#define MAX_QUEUED 20000000ull /* frames in the system: beyond, overload */
#define PROGRESS_LINES 1000 /* --progress: lines per run, at most */
#define HIST_SUB 256 /* linear sub-buckets per power of two */
#define HIST_BUCKETS (2 * HIST_SUB + 55 * HIST_SUB)

enum ev_type { EV_ARRIVAL, EV_DONE, EV_WAKE, EV_TICK, EV_HANDOFF };

/* xoshiro256**, seeded by splitmix64: the same trace for every policy. */
struct rng {
	__u64 s[4];
};

/* Latency histogram: exact below 2 * HIST_SUB ns, then log-linear. */
struct hist {
	__u64 count[HIST_BUCKETS];
	__u64 n, max;
	double sum;
};

struct frame {
	__u64 arrival;
	__u64 service;
	unsigned int flow;
	struct vz_dispatch_ticket ticket;
};

/* A FIFO of frames that grows as needed: a worker's queue, the dispatcher's. */
struct fifo {
	struct frame *q; /* a ring of cap (a power of two) */
	size_t cap, head, len;
};

struct worker {
	struct fifo wait; /* waiting frames, not the one in service */
	struct frame cur;
	bool busy, awake, waking;
};

struct event {
	__u64 t, seq;
	unsigned int type, worker;
};

struct heap {
	struct event *e;
	size_t n, cap;
	__u64 seq;
};

/* The trace: flows, and an arrival process that changes rate per step. */
struct trace {
	struct rng rng;
	__u32 *hashes;
	double *cdf; /* heavy flow sizes: Zipf */
	unsigned int flows;
	double t; /* ns, of the last arrival */
	unsigned int step;
	double step_ns;
	double rate; /* frames per ns, mean, this step */
	bool on; /* bursty: in a burst */
	double switch_at;
	bool over;
};

/* What the counters said when a step began. */
struct snapshot {
	struct vz_dispatch_stats d;
	struct vz_core_alloc_stats a;
};

struct step_result {
	struct hist lat;
	double work_ns; /* service time that arrived */
	__u64 lost; /* arrivals that found their worker's queue full */
	__u64 cold; /* frames that paid --migrate-us: their flow moved */
	double active_ns; /* integral of active workers over time */
	struct snapshot begin, end;
};

struct sim {
	const struct opts *o;
	struct vz_dispatch *d;
	struct vz_core_alloc alloc;
	struct worker w[VZ_DISPATCH_MAX_WORKERS];
	struct heap heap;
	struct trace tr;
	struct step_result *steps;
	__u64 now, step_ns, total_ns, in_system;
	unsigned int active;
	__u64 accounted; /* active_ns integrated up to here */
	/* The dispatcher as a server of its own (--dispatch-ns, --scan-ns):
	 * arrivals wait in its FIFO; it decides one frame at a time, and the
	 * frame reaches its worker when the decision's time is spent. */
	struct fifo dq;
	bool dsp_busy;
	struct frame dsp_cur;
	unsigned int dsp_worker;
	__u8 *last_worker; /* per flow: the worker of its last frame */
	FILE *timeline; /* JSON or table rows, written as they come */
	size_t timeline_rows;
	__u64 events;
	__u64 next_progress; /* --progress: the next line at this time */
};

/* realloc, or exit with one line: the simulator has no use without it. */
void *xrealloc(void *p, size_t size);

/* hist.c */
void hist_add(struct hist *h, __u64 v);
void hist_merge(struct hist *to, const struct hist *from);
double hist_quantile(const struct hist *h, double q);

/* queues.c */
void fifo_push(struct fifo *f, const struct frame *fr);
struct frame fifo_pop(struct fifo *f);
void heap_push(struct heap *h, __u64 t, unsigned int type, unsigned int worker);
struct event heap_pop(struct heap *h);

/* workload.c */
void trace_init(struct trace *tr, const struct opts *o);
bool trace_next(struct trace *tr, const struct opts *o, double *t);
unsigned int trace_flow(struct trace *tr);
__u64 trace_service(struct trace *tr, const struct opts *o);

/* model.c */
unsigned int step_of(const struct sim *s, __u64 t);
void account(struct sim *s, __u64 now);
void set_active(struct sim *s, unsigned int n);
void on_arrival(struct sim *s);
void on_done(struct sim *s, unsigned int i);
void on_handoff(struct sim *s);
void on_wake(struct sim *s, unsigned int i);

/* driver.c */
/* The policy (and the allocator) configured from the options: 0, or 1. */
int sim_init(struct sim *s, const struct opts *o, char **timeline,
	     size_t *timeline_len);
void sim_run(struct sim *s);
void sim_free(struct sim *s);

/* output.c */
void timeline_row(struct sim *s);
void report(struct sim *s, char *timeline, size_t timeline_len);

#endif
