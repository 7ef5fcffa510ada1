// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's driver: the runtime's own policy code (src/dispatch/dispatch.c,
 * core_alloc.c), configured from the options and driven over simulated
 * time. vz_dispatch_tick() runs every simulated microsecond; with --alloc
 * the core allocator runs every 5 us on each active worker's oldest waiting
 * frame, starting from one active worker (without it, every worker is
 * active throughout). The event loop runs until the trace is over and the
 * queues have drained; each step's counters are snapshot where it begins.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/sim/sim.h"

static void snapshot(const struct sim *s, struct snapshot *snap)
{
	vz_dispatch_get_stats(s->d, &snap->d);
	snap->a = s->alloc.stats;
}

/*
 * Steps up to `upto` (exclusive) begin now: what the counters say is where
 * they begin and where the step before each ends.
 */
static void begin_steps(struct sim *s, unsigned int *next_step,
			unsigned int upto)
{
	while (*next_step < upto) {
		snapshot(s, &s->steps[*next_step].begin);
		if (*next_step)
			s->steps[*next_step - 1].end =
				s->steps[*next_step].begin;
		++*next_step;
	}
}

/* The core allocator, on each active worker's oldest waiting frame. */
static void alloc_tick(struct sim *s)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int i, n;

	for (i = 0; i < s->active; i++)
		if (s->w[i].wait.len) {
			const struct fifo *q = &s->w[i].wait;

			/* 0 means none waits: a frame of time 0 is 1 */
			oldest[i] =
				q->q[q->head].arrival + !q->q[q->head].arrival;
		}
	n = vz_core_alloc_tick(&s->alloc, s->d, s->now, oldest);
	if (n != s->active)
		set_active(s, n);
}

/* Simulated microseconds done of the total: what the run has computed. */
static void show_progress(struct sim *s, __u64 done_ns)
{
	__u64 every = s->total_ns / PROGRESS_LINES;

	fprintf(stderr, "progress %llu %llu\n",
		(unsigned long long)(done_ns / 1000),
		(unsigned long long)(s->total_ns / 1000));
	fflush(stderr);
	s->next_progress = done_ns + (every > TICK_NS ? every : TICK_NS);
}

static void on_tick(struct sim *s, __u64 *next_timeline,
		    unsigned int *next_step)
{
	__u64 reached = s->now / s->step_ns + 1; /* steps begun by now */

	begin_steps(s, next_step,
		    reached < s->o->nsteps ? (unsigned int)reached
					   : s->o->nsteps);
	/* past the trace the queues drain: the total waits for them */
	if (s->o->progress && s->now >= s->next_progress &&
	    s->now < s->total_ns)
		show_progress(s, s->now);
	vz_dispatch_tick(s->d, s->now);
	if (s->o->alloc && s->now >= s->alloc.next_check)
		alloc_tick(s);
	if (s->o->timeline_us && s->now >= *next_timeline &&
	    s->now <= s->total_ns) {
		timeline_row(s);
		*next_timeline += s->o->timeline_us * 1000;
	}
	if (!s->tr.over || s->in_system || s->dq.len || s->dsp_busy)
		heap_push(&s->heap, s->now + TICK_NS, EV_TICK, 0);
}

/* The policy's configuration: the library's defaults, unless told. */
static struct vz_dispatch *new_policy(const struct opts *o)
{
	struct vz_dispatch_config dcfg;

	vz_dispatch_config_default(&dcfg, o->policy, o->cores);
	dcfg.flow_slots = o->flow_slots;
	if (o->hold_us >= 0)
		dcfg.hold_ns = (__u64)llround(o->hold_us * 1000);
	if (o->settle_us >= 0)
		dcfg.settle_ns = (__u64)llround(o->settle_us * 1000);
	if (o->max_forced >= 0)
		dcfg.max_forced = (unsigned int)o->max_forced;
	if (o->migrate_gap >= 0)
		dcfg.migrate_gap = (unsigned int)o->migrate_gap;
	if (o->force_gap >= 0)
		dcfg.force_gap = (unsigned int)o->force_gap;
	return vz_dispatch_new(&dcfg);
}

/* --alloc: the allocator starts the run with its fewest workers. */
static int init_alloc(struct sim *s, const struct opts *o)
{
	struct vz_core_alloc_config acfg;

	vz_core_alloc_config_default(&acfg, o->cores);
	if (o->holdoff_us >= 0)
		acfg.shrink_holdoff_ns = (__u64)llround(o->holdoff_us * 1000);
	vz_dispatch_set_active(s->d, acfg.min_workers);
	if (vz_core_alloc_init(&s->alloc, &acfg, 0))
		return 1;
	s->active = acfg.min_workers;
	return 0;
}

int sim_init(struct sim *s, const struct opts *o, char **timeline,
	     size_t *timeline_len)
{
	unsigned int i;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->step_ns = (__u64)llround(o->step_ms * 1e6 / TICK_NS) * TICK_NS;
	if (!s->step_ns)
		s->step_ns = TICK_NS;
	s->total_ns = s->step_ns * o->nsteps;
	s->steps = calloc(o->nsteps, sizeof(*s->steps));
	if (!s->steps)
		xrealloc(NULL, (size_t)-1);
	s->d = new_policy(o);
	if (!s->d)
		return 1;
	s->active = o->cores;
	if (o->alloc && init_alloc(s, o))
		return 1;
	for (i = 0; i < s->active; i++)
		s->w[i].awake = true;
	trace_init(&s->tr, o);
	s->tr.step_ns = (double)s->step_ns;
	s->last_worker = xrealloc(NULL, o->flows);
	memset(s->last_worker, VZ_POLICY_NONE, o->flows);
	if (o->prepopulate &&
	    vz_dispatch_prepopulate(s->d, s->tr.hashes, o->flows, 0)) {
		fprintf(stderr,
			"veloz: sim: the flow table has no room for "
			"%u flows; raise --flow-slots\n",
			o->flows);
		return 1;
	}
	if (o->timeline_us) {
		s->timeline = open_memstream(timeline, timeline_len);
		if (!s->timeline)
			xrealloc(NULL, (size_t)-1);
	}
	return 0;
}

void sim_run(struct sim *s)
{
	__u64 next_timeline = 0;
	unsigned int next_step = 0;
	double first;

	heap_push(&s->heap, 0, EV_TICK, 0);
	if (trace_next(&s->tr, s->o, &first))
		heap_push(&s->heap, (__u64)llround(first), EV_ARRIVAL, 0);
	while (s->heap.n) {
		struct event ev = heap_pop(&s->heap);

		s->now = ev.t;
		s->events++;
		switch (ev.type) {
		case EV_ARRIVAL:
			on_arrival(s);
			break;
		case EV_DONE:
			on_done(s, ev.worker);
			break;
		case EV_HANDOFF:
			on_handoff(s);
			break;
		case EV_WAKE:
			on_wake(s, ev.worker);
			break;
		default:
			on_tick(s, &next_timeline, &next_step);
		}
	}
	if (s->o->progress)
		show_progress(s, s->total_ns);
	account(s, s->total_ns);
	begin_steps(s, &next_step, s->o->nsteps); /* steps no tick reached */
	snapshot(s, &s->steps[s->o->nsteps - 1].end);
	if (s->timeline)
		fclose(s->timeline);
	s->timeline = NULL;
}

void sim_free(struct sim *s)
{
	unsigned int i;

	for (i = 0; i < VZ_DISPATCH_MAX_WORKERS; i++)
		free(s->w[i].wait.q);
	free(s->heap.e);
	free(s->dq.q);
	free(s->last_worker);
	free(s->steps);
	free(s->tr.hashes);
	free(s->tr.cdf);
	vz_dispatch_free(s->d);
}
