// SPDX-License-Identifier: BSD-2-Clause
/*
 * The userspace dispatcher's loops (src/dispatch/dispatcher.c) on real
 * threads, over a made-up backend: numbered frames of a few flows arrive
 * on two ports, the NF sends most out of the other port and drops every
 * fifth. Every frame must come back exactly once (sent, freed, refused by
 * a full ring or invalid at receive), the policy must end with nothing in
 * flight, a flow on fixed workers must keep its order and its worker, the
 * core allocator must grow under load and park the workers it no longer
 * needs, and a full ring must drop what does not fit and count it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "dispatch/dispatcher.h"
#include "dispatch/spsc.h"

#define MAX_FRAMES 100000
#define FLOWS 16
#define WORKERS 4
#define BATCH 32
#define DEADLINE_NS 20000000000ull /* a stuck loop fails, not hangs */

struct fake {
	struct vz_dispatcher dc;
	volatile sig_atomic_t stop;
	unsigned int nframes; /* to deliver */
	__u64 nf_ns; /* the NF's cost per frame */
	bool gate; /* the NF waits until every frame is delivered */
	bool park; /* before stopping, wait for the spare workers to park */
	unsigned int window; /* frames out at once at most (0: no limit) */
	__u64 deadline;
	struct vz_spsc rings[WORKERS][2];
	pthread_t thread[WORKERS + 1];
	bool running[WORKERS + 1];
	/* the dispatcher thread's */
	unsigned int next; /* frames delivered so far */
	unsigned int invalid, dropped, sent, freed, dup, wrong, reordered;
	unsigned int max_active, parked, loops;
	bool timed_out;
	__u8 port_of[MAX_FRAMES], returned[MAX_FRAMES];
	__u32 last_seq[FLOWS];
	/* the workers': the first worker each flow ran on, + 1 */
	unsigned int owner[FLOWS];
	unsigned int moved;
};

static struct fake fk;

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static __u32 flow_hash(unsigned int flow)
{
	return (flow + 1) * 2654435761u;
}

/* Frame i: flow i % FLOWS, the (i / FLOWS)th of its flow; 1 in 101 bad. */
static unsigned int rx(void *be, unsigned int port, unsigned int slot,
		       struct vz_dispatch_burst *b)
{
	struct fake *f = be;
	unsigned int n = 0, i;

	b->n = 0;
	if (f->window &&
	    f->next - f->dropped - f->sent - f->freed - f->invalid >= f->window)
		return 0;
	for (; n < BATCH && f->next < f->nframes; n++) {
		i = f->next;
		/* the gated NF reads it */
		__atomic_store_n(&f->next, i + 1, __ATOMIC_RELAXED);
		f->port_of[i] = (__u8)port;
		if (i % 101 == 100) {
			f->invalid++;
			continue;
		}
		b->job[b->n] = (struct vz_dispatch_job){ .frame = i,
							 .len = 60 + i % 3,
							 .port = (__u16)port,
							 .slot = (__u16)slot };
		b->hash[b->n++] = flow_hash(i % FLOWS);
	}
	return n;
}

static void back(struct fake *f, __u64 frame)
{
	if (frame >= f->nframes || f->returned[frame]++)
		f->dup++;
}

static void drop(void *be, const struct vz_dispatch_job *jobs, unsigned int n)
{
	struct fake *f = be;
	unsigned int i;

	for (i = 0; i < n; i++) {
		back(f, jobs[i].frame);
		f->dropped++;
	}
}

static void tx(void *be, const struct vz_dispatch_result *r, unsigned int n)
{
	struct fake *f = be;
	unsigned int i, flow;
	__u32 seq;

	for (i = 0; i < n; i++) {
		back(f, r[i].frame);
		if (r[i].out < 0) {
			f->freed++;
			continue;
		}
		f->sent++;
		if (r[i].out != (f->port_of[r[i].frame] ^ 1) || r[i].slot ||
		    r[i].len != 60 + r[i].frame % 3)
			f->wrong++;
		flow = (unsigned int)(r[i].frame % FLOWS);
		seq = (__u32)(r[i].frame / FLOWS) + 1;
		if (seq < f->last_seq[flow])
			f->reordered++;
		else
			f->last_seq[flow] = seq;
	}
}

static bool spares_parked(struct fake *f)
{
	unsigned int i,
		active = __atomic_load_n(&f->dc.active, __ATOMIC_ACQUIRE);

	for (i = active; i < f->dc.nworkers; i++)
		if (!__atomic_load_n(&f->dc.workers[i].sleeping,
				     __ATOMIC_SEQ_CST))
			return false;
	return active == 1;
}

/* Stop once every frame is back (and, if asked, the spares parked). */
static void service(void *be)
{
	struct fake *f = be;

	f->loops++;
	if (f->dc.active > f->max_active)
		f->max_active = f->dc.active;
	if (now_ns() > f->deadline) {
		f->timed_out = true;
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
	}
	if (f->invalid + f->dropped + f->sent + f->freed < f->nframes)
		return;
	if (f->park && !spares_parked(f))
		return;
	f->parked = f->park;
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
}

static void run(void *be, unsigned int worker,
		const struct vz_dispatch_job *jobs,
		struct vz_dispatch_result *r, unsigned int n)
{
	struct fake *f = be;
	unsigned int i, flow, want = worker + 1, was;
	__u64 until;

	while (f->gate &&
	       __atomic_load_n(&f->next, __ATOMIC_RELAXED) < f->nframes)
		sched_yield();
	for (i = 0; i < n; i++) {
		flow = (unsigned int)(jobs[i].frame % FLOWS);
		was = 0;
		if (!__atomic_compare_exchange_n(&f->owner[flow], &was, want,
						 false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED) &&
		    was != want)
			__atomic_fetch_add(&f->moved, 1, __ATOMIC_RELAXED);
		r[i] = (struct vz_dispatch_result){
			.frame = jobs[i].frame,
			.len = jobs[i].len,
			.out = jobs[i].frame % 5 ? (__s16)(jobs[i].port ^ 1)
						 : -1,
			.slot = jobs[i].slot,
			.ticket = jobs[i].ticket,
		};
		for (until = now_ns() + f->nf_ns; f->nf_ns && now_ns() < until;)
			;
	}
}

static void *worker_main(void *arg)
{
	vz_dispatcher_work(arg);
	return NULL;
}

static void *dispatcher_main(void *arg)
{
	vz_dispatcher_run(arg);
	return NULL;
}

static int start(void *be, int who)
{
	struct fake *f = be;
	unsigned int t = who < 0 ? WORKERS : (unsigned int)who;
	int err;

	if (who < 0)
		err = pthread_create(&f->thread[t], NULL, dispatcher_main,
				     &f->dc);
	else
		err = pthread_create(&f->thread[t], NULL, worker_main,
				     &f->dc.workers[who]);
	f->running[t] = !err;
	return -err;
}

static void wait_for(void *be, int who)
{
	struct fake *f = be;
	unsigned int t = who < 0 ? WORKERS : (unsigned int)who;

	if (f->running[t])
		pthread_join(f->thread[t], NULL);
	f->running[t] = false;
}

static const struct vz_dispatch_ops fake_ops = {
	.ring = &vz_dispatch_spsc_ring,
	.rx = rx,
	.drop = drop,
	.tx = tx,
	.service = service,
	.run = run,
	.start = start,
	.wait = wait_for,
	.collect_budget = 2 * VZ_DISPATCH_BURST,
};

/* One run to the end; false if it could not start. */
static bool run_all(enum vz_dispatch_policy policy, unsigned int workers,
		    bool alloc)
{
	struct vz_dispatcher_config cfg = {
		.policy = policy,
		.workers = workers,
		.alloc = alloc,
		.nports = 2,
		.nslots = 1,
		.batch = BATCH,
		.stop = &fk.stop,
		.ops = &fake_ops,
		.be = &fk,
	};
	unsigned int i;
	int err;

	fk.deadline = now_ns() + DEADLINE_NS;
	if (vz_dispatcher_init(&fk.dc, &cfg))
		return false;
	for (i = 0; i < workers; i++) {
		if (vz_spsc_init(&fk.rings[i][0], VZ_DISPATCH_RING,
				 sizeof(struct vz_dispatch_job)) ||
		    vz_spsc_init(&fk.rings[i][1], VZ_DISPATCH_RING,
				 sizeof(struct vz_dispatch_result)))
			return false;
		fk.dc.workers[i].jobs = &fk.rings[i][0];
		fk.dc.workers[i].results = &fk.rings[i][1];
	}
	err = vz_dispatcher_start(&fk.dc);
	vz_dispatcher_join(&fk.dc);
	return !err;
}

static void finish(void)
{
	unsigned int i;

	vz_dispatcher_destroy(&fk.dc);
	for (i = 0; i < WORKERS; i++) {
		vz_spsc_free(&fk.rings[i][0]);
		vz_spsc_free(&fk.rings[i][1]);
	}
}

/* What every run must show: each frame back once, nothing left in flight. */
static void check_accounts(const char *what)
{
	struct vz_dispatch_stats s;
	unsigned int i, in_flight = 0;

	vz_dispatch_get_stats(fk.dc.policy, &s);
	for (i = 0; i < fk.dc.nworkers; i++)
		in_flight += s.in_flight[i];
	CHECK(!fk.timed_out, "%s: timed out after %u loops", what, fk.loops);
	CHECK(fk.invalid + fk.dropped + fk.sent + fk.freed == fk.nframes,
	      "%s: %u invalid + %u dropped + %u sent + %u freed != %u", what,
	      fk.invalid, fk.dropped, fk.sent, fk.freed, fk.nframes);
	CHECK(!fk.dup, "%s: %u frames back twice", what, fk.dup);
	CHECK(!fk.wrong, "%s: %u verdicts on the wrong port", what, fk.wrong);
	CHECK(!in_flight, "%s: %u frames still in flight", what, in_flight);
	CHECK(s.frames == fk.nframes - fk.invalid, "%s: the policy saw %llu",
	      what, (unsigned long long)s.frames);
	CHECK(vz_dispatch_report_ring_full(&fk.dc.report) == fk.dropped,
	      "%s: ring_full %llu, dropped %u", what,
	      (unsigned long long)vz_dispatch_report_ring_full(&fk.dc.report),
	      fk.dropped);
}

static void fixed_workers_keep_flows(void)
{
	struct vz_dispatch_stats s;
	unsigned int i;

	memset(&fk, 0, sizeof(fk));
	fk.nframes = MAX_FRAMES;
	fk.window = VZ_DISPATCH_RING / 4; /* no ring fills */
	REQUIRE(run_all(VZ_DISPATCH_RSS_MOD, 3, false), "rss-mod: start");
	check_accounts("rss-mod");
	CHECK(!fk.dropped, "rss-mod: %u dropped", fk.dropped);
	vz_dispatch_get_stats(fk.dc.policy, &s);
	CHECK(!fk.reordered && !s.reordered, "rss-mod: %u reordered (%llu)",
	      fk.reordered, (unsigned long long)s.reordered);
	CHECK(!fk.moved, "rss-mod: %u frames off their flow's worker",
	      fk.moved);
	for (i = 0; i < 3; i++)
		CHECK(s.frames_per_worker[i], "rss-mod: worker %u idle", i);
	CHECK(fk.max_active == 3, "rss-mod: %u active", fk.max_active);
out:
	finish();
}

static void allocator_grows_then_parks(void)
{
	struct vz_core_alloc_stats a;

	memset(&fk, 0, sizeof(fk));
	fk.nframes = 20000;
	fk.nf_ns = 2000;
	fk.park = true;
	fk.window = VZ_DISPATCH_RING / 4;
	REQUIRE(run_all(VZ_DISPATCH_FLOW_AFFINITY, WORKERS, true),
		"alloc: start");
	check_accounts("alloc");
	a = fk.dc.alloc.stats;
	CHECK(fk.max_active > 1 && a.grows, "alloc: never grew (%u active)",
	      fk.max_active);
	CHECK(a.shrinks, "alloc: never shrank");
	CHECK(fk.parked, "alloc: the spare workers did not park");
out:
	finish();
}

static void full_ring_drops_the_rest(void)
{
	unsigned int valid, held;

	memset(&fk, 0, sizeof(fk));
	fk.nframes = 3 * VZ_DISPATCH_RING;
	fk.gate = true;
	REQUIRE(run_all(VZ_DISPATCH_RSS_MOD, 1, false), "full: start");
	check_accounts("full");
	valid = fk.nframes - fk.invalid;
	/* the ring, and the burst its worker took before it was stuck */
	held = valid - fk.dropped;
	CHECK(held >= VZ_DISPATCH_RING && held <= VZ_DISPATCH_RING + BATCH,
	      "full: %u of %u frames got through a ring of %u", held, valid,
	      VZ_DISPATCH_RING);
out:
	finish();
}

int main(void)
{
	fixed_workers_keep_flows();
	allocator_grows_then_parks();
	full_ring_drops_the_rest();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
