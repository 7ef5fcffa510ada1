// SPDX-License-Identifier: BSD-2-Clause
/*
 * The live-frames transmit loop (see gen.c): BPF_PROG_RUN of gen.bpf.o with
 * BPF_F_TEST_XDP_LIVE_FRAMES, about a millisecond of traffic per call when
 * paced, as much as one call takes when not.
 *
 * With --threads N, N threads run it at once, each with its share of the
 * rate and the count, each pinned to a CPU of its own (round robin over the
 * CPUs this process may use) so that two never queue on one CPU while
 * another idles. A frame's sending thread travels as its XDP metadata
 * (struct vz_gen_meta): the program numbers each thread's frames apart
 * (gen.h), so the numbers of all threads together are 0, 1, 2, ... Thread 0
 * is the calling thread, the only one that takes signals: the others see
 * *stop (or a failed thread) between their calls.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "common/err.h"
#include "gen/gen.h"
#include "gen/live.h"
#include "common/clock.h"

#define GEN_MAX_CHUNK 65536

struct worker {
	const struct vz_gen_live *l;
	int *failed; /* set by the first thread to fail (atomic) */
	__u32 index;
	int cpu; /* -1: not pinned */
	__u64 rate, count; /* this thread's share; count 0 = duration */
	double start, end;
	__u64 sent; /* read by thread 0 for progress: atomic */
	int err;
	pthread_t tid;
	/* what the kernel copies into each page: metadata, then the frame */
	__u8 data[sizeof(struct vz_gen_meta) + VZ_GEN_MAX_SIZE];
};

/* Frames per test run: about a millisecond of traffic; big at full rate. */
static __u64 chunk_frames(__u64 rate)
{
	__u64 chunk = rate ? rate / 1000 : GEN_MAX_CHUNK;

	if (chunk < 1)
		chunk = 1;
	return chunk > GEN_MAX_CHUNK ? GEN_MAX_CHUNK : chunk;
}

/* Has this thread sent its count, or run the duration? */
static bool run_over(const struct worker *w, __u64 sent, double elapsed)
{
	if (w->l->count)
		return sent >= w->count;
	return w->l->duration > 0 && elapsed >= w->l->duration;
}

/* Every thread's frames so far (thread 0 shows them once a second). */
static __u64 total_sent(const struct worker *ws, __u32 n)
{
	__u64 sum = 0;
	__u32 i;

	for (i = 0; i < n; i++)
		sum += __atomic_load_n(&ws[i].sent, __ATOMIC_RELAXED);
	return sum;
}

static void show_progress(const struct worker *w, double t, double *shown)
{
	__u64 sent;

	if (t - *shown < 1.0)
		return;
	/* thread 0 is the first of the array: every thread's follows */
	sent = total_sent(w, w->l->threads);
	fprintf(stderr, "\rsent %llu frames, %.0f pps ",
		(unsigned long long)sent, (double)sent / (t - w->start));
	*shown = t;
}

/* One call's frames: a millisecond's worth, or what the count leaves. */
static __u32 next_repeat(const struct worker *w, __u64 sent, __u64 chunk)
{
	if (w->count && w->count - sent < chunk)
		return (__u32)(w->count - sent);
	return (__u32)chunk;
}

static void pin(const struct worker *w)
{
	cpu_set_t set;

	if (w->cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	/* unpinned, it still sends: only the spread over CPUs is lost */
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * A call's first frame reads the clock afresh (gen.h, stamp_every): the
 * last read may be a pacing interval old. Only this thread writes its slot,
 * and the program runs for it only inside its calls.
 */
static int fresh_stamp(const struct worker *w)
{
	struct vz_gen_seq_slot slot;

	if (w->l->seq_fd < 0)
		return 0;
	if (bpf_map_lookup_elem(w->l->seq_fd, &w->index, &slot))
		return -errno;
	slot.stamp_left = 0;
	if (bpf_map_update_elem(w->l->seq_fd, &w->index, &slot, BPF_EXIST))
		return -errno;
	return 0;
}

static void *send_loop(void *arg)
{
	struct worker *w = arg;
	const struct vz_gen_live *l = w->l;
	__u32 meta = sizeof(struct vz_gen_meta);
	/* the kernel wants data_end to describe the frame when a ctx is
	 * given; data is where the frame starts after the metadata */
	struct xdp_md ctx = { .data = meta,
			      .data_end = meta + l->size,
			      .ingress_ifindex = (__u32)l->ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = w->data,
		    .data_size_in = meta + l->size, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx),
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES,
		    .batch_size = l->batch);
	__u64 sent = 0, chunk = chunk_frames(w->rate);
	double due, t, shown = w->start;
	bool progress = l->progress && w->index == 0;

	pin(w);
	while (!*l->stop && !__atomic_load_n(w->failed, __ATOMIC_RELAXED)) {
		t = vz_now_s();
		if (run_over(w, sent, t - w->start))
			break;
		if (w->rate) {
			due = w->start + (double)sent / (double)w->rate;
			if (due > t) {
				vz_sleep_until(due, l->stop);
				continue;
			}
		}
		opts.repeat = next_repeat(w, sent, chunk);
		w->err = fresh_stamp(w);
		if (!w->err && bpf_prog_test_run_opts(l->prog_fd, &opts)) {
			if (errno == EINTR)
				continue;
			w->err = -errno;
		}
		if (w->err) {
			__atomic_store_n(w->failed, 1, __ATOMIC_RELAXED);
			break;
		}
		sent += opts.repeat;
		__atomic_store_n(&w->sent, sent, __ATOMIC_RELAXED);
		if (progress)
			show_progress(w, t, &shown);
	}
	if (progress && shown > w->start)
		fputc('\n', stderr);
	w->end = vz_now_s();
	return NULL;
}

/* The CPUs this process may run on, in order; how many. */
static int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int c, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

/* Thread i's share of a total: the first `total % n` get one more. */
static __u64 share(__u64 total, __u32 n, __u32 i)
{
	return total / n + (i < total % n ? 1 : 0);
}

static void init_workers(const struct vz_gen_live *l, struct worker *ws,
			 int *failed)
{
	int cpus[VZ_GEN_MAX_THREADS], ncpus = 0;
	double start = vz_now_s();
	struct vz_gen_meta meta;
	__u32 i;

	if (l->threads > 1)
		ncpus = allowed_cpus(cpus, VZ_GEN_MAX_THREADS);
	for (i = 0; i < l->threads; i++) {
		struct worker *w = &ws[i];

		w->l = l;
		w->failed = failed;
		w->index = i;
		w->cpu = ncpus ? cpus[i % (__u32)ncpus] : -1;
		w->rate = share(l->rate, l->threads, i);
		w->count = share(l->count, l->threads, i);
		w->start = start;
		meta.thread = i;
		memcpy(w->data, &meta, sizeof(meta));
		memcpy(w->data + sizeof(meta), l->frame, l->size);
	}
}

/*
 * Threads 1.. on threads of their own, signals blocked (thread 0 takes
 * them). Returns how many threads run, thread 0 counted; *err if fewer.
 */
static __u32 start_workers(struct worker *ws, __u32 n, int *err)
{
	sigset_t all, old;
	__u32 i;
	int e = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 1; i < n; i++) {
		e = pthread_create(&ws[i].tid, NULL, send_loop, &ws[i]);
		if (e)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		vz_err("cannot start transmit thread %u: %s", i, strerror(e));
		/* those started stop at once, and so does thread 0 */
		__atomic_store_n(ws[0].failed, 1, __ATOMIC_RELAXED);
		*err = -e;
	}
	return i;
}

__u64 vz_gen_live_send(const struct vz_gen_live *l, double *elapsed, int *err)
{
	int failed = 0;
	struct worker *ws = calloc(l->threads, sizeof(*ws));
	__u32 i, running;
	double end = 0;
	__u64 sent = 0;

	*elapsed = 0;
	*err = 0;
	if (!ws)
		return *err = -ENOMEM, 0;
	init_workers(l, ws, &failed);
	running = start_workers(ws, l->threads, err);
	send_loop(&ws[0]); /* returns at once if a thread failed to start */
	for (i = 1; i < running; i++)
		pthread_join(ws[i].tid, NULL);
	for (i = 0; i < running; i++) {
		sent += ws[i].sent;
		if (ws[i].end > end)
			end = ws[i].end;
		if (!*err)
			*err = ws[i].err;
	}
	*elapsed = end > ws[0].start ? end - ws[0].start : 0;
	free(ws);
	return sent;
}
