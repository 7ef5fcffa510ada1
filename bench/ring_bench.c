// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-ring-bench: veloz's SPSC ring (src/dispatch/spsc.h) beside DPDK's
 * rte_ring created single-producer single-consumer (RING_F_SP_ENQ |
 * RING_F_SC_DEQ), in one process, cycles per element by rdtsc.
 *
 * Both rings hold 4096 pointer-sized entries (DPDK's ring_perf_autotest's
 * size and object). Burst 1 is the single-entry calls (vz_spsc_push/pop,
 * rte_ring_sp_enqueue/sc_dequeue), burst 32 the burst calls
 * (vz_spsc_push_burst/pop_burst, rte_ring_sp_enqueue_burst/
 * sc_dequeue_burst).
 *
 *   single core: as ring_perf_autotest, a burst in then the same burst out,
 *                repeated; cycles over (iterations * burst): one enqueue and
 *                one dequeue per element.
 *   two cores:   a producer pinned to CPU 0 and a consumer pinned to CPU 1
 *                pass -n elements through the ring; cycles from the start
 *                (both threads at a barrier) to the consumer's last element,
 *                over the element count. Each dequeued value is checked
 *                against the sequence the producer wrote.
 *
 * Trials (-t, default 7) interleave the two rings; medians and the ratio
 * of medians (veloz / rte: below 1.0 veloz costs less) are printed.
 * A benchmark, not a test: it asserts only that every element arrived, in
 * order (else "MISMATCH" and exit status 1).
 *
 *   vz-ring-bench [-n ELEMENTS] [-t TRIALS]
 */
#include <errno.h>
#include <linux/types.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#include <rte_ring.h>

#include "bench_stats.h"
#include "spsc.h"

#define RING_SIZE 4096
#define MAX_TRIALS BENCH_MAX_TRIALS
#define MAX_BURST 32

enum { LIB_VZ, LIB_RTE, NLIBS };
static const char *const lib_name[NLIBS] = { "veloz", "rte" };

struct rings {
	struct vz_spsc vz;
	struct rte_ring *rte;
};

static int wrong;

static __u64 tsc(void)
{
	return __rdtsc();
}

/* Up to n entries in/out, through one library's burst-`burst` calls. */
static unsigned int enq(struct rings *r, int lib, void **objs, unsigned int n,
			unsigned int burst)
{
	if (lib == LIB_VZ) {
		if (burst == 1)
			return vz_spsc_push(&r->vz, objs);
		return vz_spsc_push_burst(&r->vz, objs, n);
	}
	if (burst == 1)
		return rte_ring_sp_enqueue(r->rte, objs[0]) == 0;
	return rte_ring_sp_enqueue_burst(r->rte, objs, n, NULL);
}

static unsigned int deq(struct rings *r, int lib, void **objs, unsigned int n,
			unsigned int burst)
{
	if (lib == LIB_VZ) {
		if (burst == 1)
			return vz_spsc_pop(&r->vz, objs);
		return vz_spsc_pop_burst(&r->vz, objs, n);
	}
	if (burst == 1)
		return rte_ring_sc_dequeue(r->rte, objs) == 0;
	return rte_ring_sc_dequeue_burst(r->rte, objs, n, NULL);
}

/*
 * The timed loops, one per library and burst size so that each compiles to
 * its own straight loop (as ring_perf_autotest's, whose burst size is a
 * constant per call).
 */
#define SINGLE_LOOP(fn, lib, burst)                                            \
	static double fn(struct rings *r, __u64 iters)                         \
	{                                                                      \
		void *objs[MAX_BURST];                                         \
		__u64 i, t0, got = 0;                                          \
		unsigned int k;                                                \
                                                                               \
		for (k = 0; k < MAX_BURST; k++)                                \
			objs[k] = (void *)(unsigned long)(k + 1);              \
		t0 = tsc();                                                    \
		for (i = 0; i < iters; i++) {                                  \
			got += enq(r, lib, objs, burst, burst);                \
			got -= deq(r, lib, objs, burst, burst);                \
		}                                                              \
		t0 = tsc() - t0;                                               \
		if (got) {                                                     \
			printf("MISMATCH %s burst %u: %llu left\n",            \
			       lib_name[lib], burst, (unsigned long long)got); \
			wrong = 1;                                             \
		}                                                              \
		return (double)t0 / (double)(iters * burst);                   \
	}
SINGLE_LOOP(single_vz_1, LIB_VZ, 1)
SINGLE_LOOP(single_vz_32, LIB_VZ, 32)
SINGLE_LOOP(single_rte_1, LIB_RTE, 1)
SINGLE_LOOP(single_rte_32, LIB_RTE, 32)

/* ---- two cores ----------------------------------------------------------- */

struct two {
	struct rings *r;
	int lib;
	unsigned int burst;
	__u64 n;
	int go; /* both threads ready: start */
	int ready;
	__u64 t0, t1;
	__u64 bad;
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void start(struct two *w)
{
	__atomic_add_fetch(&w->ready, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&w->ready, __ATOMIC_ACQUIRE) < 2)
		sched_yield(); /* the other thread may not be on its CPU yet */
}

/*
 * A thread that made no progress for a long while gives its CPU up: where
 * the two threads could not be pinned apart (one CPU), spinning would wait
 * out whole time slices. Pinned apart, a ring is never stuck that long.
 */
static void spin_or_yield(unsigned int moved, unsigned int *spins)
{
	if (moved)
		*spins = 0;
	else if (++*spins >= 4096) {
		*spins = 0;
		sched_yield();
	}
}

static void *producer(void *arg)
{
	struct two *w = arg;
	void *objs[MAX_BURST];
	__u64 next = 1, end = w->n + 1;
	unsigned int k, want, put, spins = 0;

	pin(0);
	start(w);
	w->t0 = tsc();
	while (next < end) {
		want = end - next < w->burst ? (unsigned int)(end - next)
					     : w->burst;
		for (k = 0; k < want; k++)
			objs[k] = (void *)(unsigned long)(next + k);
		put = enq(w->r, w->lib, objs, want, w->burst);
		next += put;
		spin_or_yield(put, &spins);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct two *w = arg;
	void *objs[MAX_BURST];
	__u64 expect = 1, end = w->n + 1;
	unsigned int k, got, spins = 0;

	pin(1);
	start(w);
	while (expect < end) {
		got = deq(w->r, w->lib, objs, w->burst, w->burst);
		for (k = 0; k < got; k++)
			w->bad += (unsigned long)objs[k] != expect + k;
		expect += got;
		spin_or_yield(got, &spins);
	}
	w->t1 = tsc();
	return NULL;
}

static double two_core(struct rings *r, int lib, unsigned int burst, __u64 n)
{
	struct two w = { .r = r, .lib = lib, .burst = burst, .n = n };
	pthread_t p, c;

	if (pthread_create(&c, NULL, consumer, &w) ||
	    pthread_create(&p, NULL, producer, &w)) {
		fprintf(stderr, "vz-ring-bench: pthread_create failed\n");
		exit(1);
	}
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	if (w.bad) {
		printf("MISMATCH %s two-core burst %u: %llu out of order\n",
		       lib_name[lib], burst, (unsigned long long)w.bad);
		wrong = 1;
	}
	return (double)(w.t1 - w.t0) / (double)n;
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-n ELEMENTS] [-t TRIALS]\n", argv0);
}

/* 0, or the exit status: 0 after -h, 2 on bad arguments. */
static int parse_args(int argc, char **argv, __u64 *n, unsigned int *trials)
{
	char *end;
	int opt;

	while ((opt = getopt(argc, argv, "n:t:h")) != -1) {
		switch (opt) {
		case 'n':
			errno = 0;
			*n = strtoull(optarg, &end, 0);
			if (errno || *end || *n < MAX_BURST) {
				fprintf(stderr,
					"vz-ring-bench: -n: at least %u\n",
					MAX_BURST);
				return 2;
			}
			break;
		case 't':
			*trials = (unsigned int)strtoul(optarg, &end, 0);
			if (*end || *trials < 1 || *trials > MAX_TRIALS) {
				fprintf(stderr, "vz-ring-bench: -t: 1..%u\n",
					MAX_TRIALS);
				return 2;
			}
			break;
		case 'h':
			usage(argv[0]);
			return -1;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (optind != argc) {
		usage(argv[0]);
		return 2;
	}
	*n -= *n % MAX_BURST;
	return 0;
}

/*
 * Both rings. rte_ring_init() on memory of our own: no EAL, no huge pages
 * needed, so both rings sit on the same kind of memory. 0, or -1 said.
 */
static int init_rings(struct rings *r)
{
	ssize_t sz = rte_ring_get_memsize(RING_SIZE);
	void *mem;

	if (sz < 0 || posix_memalign(&mem, 64, (size_t)sz)) {
		fprintf(stderr, "vz-ring-bench: out of memory\n");
		return -1;
	}
	r->rte = mem;
	if (rte_ring_init(r->rte, "vz-ring-bench", RING_SIZE,
			  RING_F_SP_ENQ | RING_F_SC_DEQ)) {
		fprintf(stderr, "vz-ring-bench: rte_ring_init failed\n");
		return -1;
	}
	if (vz_spsc_init(&r->vz, RING_SIZE, sizeof(void *))) {
		fprintf(stderr, "vz-ring-bench: out of memory\n");
		return -1;
	}
	return 0;
}

static double res[2][2][NLIBS][MAX_TRIALS]; /* [mode][burst][lib] */
static const unsigned int bursts[2] = { 1, 32 };

/* Trial t: each burst, one core then two, the libraries interleaved. */
static void run_trial(struct rings *r, __u64 n, unsigned int t)
{
	unsigned int b, lib;

	for (b = 0; b < 2; b++) {
		__u64 iters = n / bursts[b];

		res[0][b][LIB_VZ][t] =
			b ? single_vz_32(r, iters) : single_vz_1(r, iters);
		res[0][b][LIB_RTE][t] =
			b ? single_rte_32(r, iters) : single_rte_1(r, iters);
		for (lib = 0; lib < NLIBS; lib++)
			res[1][b][lib][t] = two_core(r, (int)lib, bursts[b], n);
	}
}

static void print_results(unsigned int trials)
{
	unsigned int m, b;

	printf("\ncycles per element (rdtsc), median of %u; single core: "
	       "a burst in, then out;\ntwo cores: producer on CPU 0, "
	       "consumer on CPU 1\n",
	       trials);
	printf("%-22s %9s %9s %10s\n", "", "veloz", "rte", "veloz/rte");
	for (m = 0; m < 2; m++)
		for (b = 0; b < 2; b++) {
			double v = bench_median(res[m][b][LIB_VZ], (int)trials),
			       x = bench_median(res[m][b][LIB_RTE],
						(int)trials);
			char name[64];

			snprintf(name, sizeof(name), "%s, burst %u",
				 m ? "two cores" : "single core", bursts[b]);
			printf("%-22s %9.2f %9.2f %9.2fx\n", name, v, x, v / x);
		}
}

int main(int argc, char **argv)
{
	__u64 n = 1 << 24;
	unsigned int trials = 7, t;
	struct rings r;
	int ret;

	ret = parse_args(argc, argv, &n, &trials);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (init_rings(&r))
		return 1;
	printf("vz-ring-bench: rings of %u pointers, %llu elements per "
	       "measure, %u trials (interleaved)\n",
	       RING_SIZE, (unsigned long long)n, trials);
	for (t = 0; t < trials; t++)
		run_trial(&r, n, t);
	print_results(trials);
	printf("elements: %s\n",
	       wrong ? "MISMATCH (see above)" : "all arrived, in order");
	vz_spsc_free(&r.vz);
	free(r.rte);
	return wrong;
}
