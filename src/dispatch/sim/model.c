// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's queueing model. At arrival the dispatcher calls
 * vz_dispatch_pick() (at once, or as a server of its own when deciding
 * costs --dispatch-ns and --scan-ns) and the frame joins that worker's
 * FIFO. A worker serves its queue one frame at a time while it is active,
 * and after being parked until its queue is empty, then sleeps; a sleeping
 * worker made active again takes --wake-us before it serves. At
 * completion: vz_dispatch_done(); latency = completion - arrival.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dispatch/sim/sim.h"

unsigned int step_of(const struct sim *s, __u64 t)
{
	__u64 i = t / s->step_ns;

	return i < s->o->nsteps ? (unsigned int)i : s->o->nsteps - 1;
}

/* Integrate the active workers up to `now`, step by step. */
void account(struct sim *s, __u64 now)
{
	if (now > s->total_ns)
		now = s->total_ns;
	while (s->accounted < now) {
		unsigned int i = step_of(s, s->accounted);
		__u64 end = (i + 1) * s->step_ns;

		if (end > now)
			end = now;
		s->steps[i].active_ns +=
			(double)s->active * (double)(end - s->accounted);
		s->accounted = end;
	}
}

static void try_serve(struct sim *s, unsigned int i)
{
	struct worker *w = &s->w[i];

	if (w->busy || !w->awake)
		return;
	if (!w->wait.len) {
		if (i >= s->active)
			w->awake = false; /* parked and drained: sleep */
		return;
	}
	w->cur = fifo_pop(&w->wait);
	w->busy = true;
	heap_push(&s->heap, s->now + w->cur.service, EV_DONE, i);
}

static void wake(struct sim *s, unsigned int i)
{
	struct worker *w = &s->w[i];
	__u64 delay = (__u64)llround(s->o->wake_us * 1000);

	if (w->awake || w->waking)
		return;
	if (!delay) {
		w->awake = true;
		try_serve(s, i);
		return;
	}
	w->waking = true;
	heap_push(&s->heap, s->now + delay, EV_WAKE, i);
}

static void enqueue(struct sim *s, unsigned int i, const struct frame *f)
{
	struct worker *w = &s->w[i];

	fifo_push(&w->wait, f);
	if (!w->awake)
		wake(s, i); /* only a waking worker is given frames asleep */
	try_serve(s, i);
}

/*
 * A decided frame reaches worker i: its queue, or lost if full (as the
 * dispatcher does with a full ring). A flow that changed worker pays
 * --migrate-us on this frame: its state is cold in the new worker's cache.
 */
static void hand_off(struct sim *s, unsigned int i, struct frame *f)
{
	struct step_result *step = &s->steps[step_of(s, f->arrival)];
	__u8 *last = &s->last_worker[f->flow];

	step->work_ns += (double)f->service; /* offered: before any penalty */
	if (*last != VZ_POLICY_NONE && *last != i && s->o->migrate_us > 0) {
		f->service += (__u64)llround(s->o->migrate_us * 1000);
		step->cold++;
	}
	*last = (__u8)i;
	if (s->o->queue_cap && s->w[i].wait.len >= s->o->queue_cap) {
		vz_dispatch_cancel(s->d, i, &f->ticket);
		step->lost++;
	} else if (++s->in_system > MAX_QUEUED) {
		fprintf(stderr,
			"veloz: sim: more than %llu frames queued: the "
			"workers cannot keep up with this load\n",
			MAX_QUEUED);
		exit(1);
	} else {
		enqueue(s, i, f);
	}
}

/* The dispatcher decides its next waiting frame, if idle and any wait. */
static void dispatch_next(struct sim *s)
{
	struct vz_dispatch_stats before, after;
	double cost;

	if (s->dsp_busy || !s->dq.len)
		return;
	s->dsp_cur = fifo_pop(&s->dq);
	vz_dispatch_get_stats(s->d, &before);
	s->dsp_worker = vz_dispatch_pick(s->d, s->tr.hashes[s->dsp_cur.flow],
					 s->now, &s->dsp_cur.ticket);
	vz_dispatch_get_stats(s->d, &after);
	cost = s->o->dispatch_ns +
	       s->o->scan_ns * (double)(after.compared - before.compared);
	s->dsp_busy = true;
	heap_push(&s->heap, s->now + (__u64)llround(cost), EV_HANDOFF, 0);
}

static void dispatcher_push(struct sim *s, const struct frame *f)
{
	fifo_push(&s->dq, f);
	if (s->dq.len > MAX_QUEUED) {
		fprintf(stderr,
			"veloz: sim: more than %llu frames wait for "
			"the dispatcher: it cannot keep up with this "
			"load at this cost per frame\n",
			MAX_QUEUED);
		exit(1);
	}
	dispatch_next(s);
}

void on_handoff(struct sim *s)
{
	s->dsp_busy = false;
	hand_off(s, s->dsp_worker, &s->dsp_cur);
	dispatch_next(s);
}

void on_arrival(struct sim *s)
{
	struct frame f;
	double next;
	unsigned int i;

	f.flow = trace_flow(&s->tr);
	f.arrival = s->now;
	f.service = trace_service(&s->tr, s->o);
	if (s->o->dispatch_ns > 0 || s->o->scan_ns > 0) {
		dispatcher_push(s, &f);
	} else { /* a dispatcher that costs nothing: decided on arrival */
		i = vz_dispatch_pick(s->d, s->tr.hashes[f.flow], s->now,
				     &f.ticket);
		hand_off(s, i, &f);
	}
	if (trace_next(&s->tr, s->o, &next))
		heap_push(&s->heap, (__u64)llround(next), EV_ARRIVAL, 0);
}

void on_done(struct sim *s, unsigned int i)
{
	struct worker *w = &s->w[i];

	vz_dispatch_done(s->d, i, &w->cur.ticket);
	hist_add(&s->steps[step_of(s, w->cur.arrival)].lat,
		 s->now - w->cur.arrival);
	s->in_system--;
	w->busy = false;
	try_serve(s, i);
}

void set_active(struct sim *s, unsigned int n)
{
	unsigned int i, old = s->active;

	account(s, s->now);
	s->active = n;
	for (i = old; i < n; i++)
		wake(s, i);
	for (i = n; i < old; i++)
		try_serve(s, i); /* an idle one goes to sleep */
}

/* A parked worker made active again has woken up: it serves. */
void on_wake(struct sim *s, unsigned int i)
{
	s->w[i].waking = false;
	s->w[i].awake = true;
	try_serve(s, i);
}
