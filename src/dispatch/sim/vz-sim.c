// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim: a discrete-event simulator of the dispatch stage. It runs the
 * runtime's own policy code (src/dispatch/dispatch.c, core_alloc.c) on a
 * generated trace, for up to 64 workers, where this machine has 2 cores.
 *
 * Model. Frames arrive (Poisson, or on/off bursts of the same mean) from
 * --flows flows whose hash is the Toeplitz RSS hash of a random 5-tuple.
 * At arrival the dispatcher calls vz_dispatch_pick() and the frame joins
 * that worker's FIFO queue. A worker serves its queue one frame at a time
 * while it is active, and after being parked until its queue is empty, then
 * sleeps; a sleeping worker made active again takes --wake-us before it
 * serves. At completion: vz_dispatch_done(); latency = completion - arrival.
 * vz_dispatch_tick() runs every simulated microsecond; with --alloc the
 * core allocator runs every 5 us on each active worker's oldest waiting
 * frame, starting from one active worker (without it, every worker is
 * active throughout). Offered load is a fraction of the capacity of
 * --cores workers, constant (--load) or raised in steps (--ramp).
 *
 * Statistics per step: a frame belongs to the step it arrived in; counts
 * the policy code keeps (reordered, flows and buckets moved, reallocations)
 * belong to the step they happened in, the last step taking what happens
 * while the queues drain. Latency percentiles come from a log histogram
 * with 256 linear sub-buckets per power of two (within 0.4%); mean and max
 * are exact.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"
#include "dispatch/toeplitz.h"

#define MAX_STEPS 64
#define TICK_NS 1000ull
#define MAX_QUEUED 20000000ull /* frames in the system: beyond, overload */
#define HIST_SUB 256 /* linear sub-buckets per power of two */
#define HIST_BUCKETS (2 * HIST_SUB + 55 * HIST_SUB)
#define BURST_FACTOR 4.0 /* on: 4x the mean rate, 20% of the time */
#define BURST_ON 0.2

enum arrivals { ARR_POISSON, ARR_BURSTY };
enum service { SVC_EXP, SVC_CONST, SVC_HEAVY };
enum flow_sizes { FS_UNIFORM, FS_HEAVY };
enum ev_type { EV_ARRIVAL, EV_DONE, EV_WAKE, EV_TICK, EV_HANDOFF };

struct opts {
	enum vz_dispatch_policy policy;
	unsigned int cores;
	double loads[MAX_STEPS];
	unsigned int nsteps;
	double step_ms;
	enum arrivals arrivals;
	double burst_us;
	enum service service;
	double service_us;
	unsigned int flows;
	enum flow_sizes flow_sizes;
	double zipf_s;
	unsigned int flow_slots;
	bool alloc, prepopulate, json, verbose;
	double wake_us;
	double hold_us; /* buckets: < 0 for the library's default */
	double settle_us; /* buckets: < 0 for the library's default */
	long long max_forced; /* buckets: < 0 for the library's default */
	long long migrate_gap; /* flow-affinity: < 0 for the default */
	long long force_gap; /* < 0 for the default */
	double holdoff_us; /* allocator: < 0 for the default */
	double migrate_us; /* a moved flow's next frame costs this more */
	double dispatch_ns; /* the dispatcher's own time per frame */
	double scan_ns; /* ... and per worker it compares */
	unsigned long long queue_cap; /* frames a worker queues; 0: no bound */
	unsigned long long seed;
	unsigned long long timeline_us;
};

/* xoshiro256**, seeded by splitmix64: the same trace for every policy. */
struct rng {
	__u64 s[4];
};

static __u64 splitmix(__u64 *x)
{
	__u64 z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, __u64 seed)
{
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix(&seed);
}

static __u64 rotl(__u64 x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static __u64 rng_next(struct rng *r)
{
	__u64 *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* Uniform in [0, 1). */
static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static double rng_exp(struct rng *r, double mean)
{
	return -log1p(-rng_unit(r)) * mean;
}

/* Latency histogram: exact below 2 * HIST_SUB ns, then log-linear. */
struct hist {
	__u64 count[HIST_BUCKETS];
	__u64 n, max;
	double sum;
};

static unsigned int hist_index(__u64 v)
{
	unsigned int e, shift;

	if (v < 2 * HIST_SUB)
		return (unsigned int)v;
	e = 63 - (unsigned int)__builtin_clzll(v); /* >= 9 */
	shift = e - 8;
	return 2 * HIST_SUB + (e - 9) * HIST_SUB +
	       (unsigned int)((v >> shift) - HIST_SUB);
}

/* The middle of bucket i, in ns. */
static double hist_value(unsigned int i)
{
	unsigned int e, shift;
	__u64 lo;

	if (i < 2 * HIST_SUB)
		return i;
	e = (i - 2 * HIST_SUB) / HIST_SUB + 9;
	shift = e - 8;
	lo = ((__u64)(HIST_SUB + (i - 2 * HIST_SUB) % HIST_SUB)) << shift;
	return (double)lo + (double)(1ull << shift) / 2;
}

static void hist_add(struct hist *h, __u64 v)
{
	h->count[hist_index(v)]++;
	h->n++;
	h->sum += (double)v;
	if (v > h->max)
		h->max = v;
}

static void hist_merge(struct hist *to, const struct hist *from)
{
	unsigned int i;

	for (i = 0; i < HIST_BUCKETS; i++)
		to->count[i] += from->count[i];
	to->n += from->n;
	to->sum += from->sum;
	if (from->max > to->max)
		to->max = from->max;
}

/* The q-quantile (nearest rank), in ns. */
static double hist_quantile(const struct hist *h, double q)
{
	__u64 rank, seen = 0;
	unsigned int i;

	if (!h->n)
		return 0;
	rank = (__u64)ceil(q * (double)h->n);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			double v = hist_value(i);

			return v > (double)h->max ? (double)h->max : v;
		}
	}
	return (double)h->max;
}

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

static void *xrealloc(void *p, size_t size);

static void fifo_push(struct fifo *f, const struct frame *fr)
{
	if (f->len == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64, k;
		struct frame *q = xrealloc(NULL, cap * sizeof(*q));

		for (k = 0; k < f->len; k++)
			q[k] = f->q[(f->head + k) & (f->cap - 1)];
		free(f->q);
		f->q = q;
		f->cap = cap;
		f->head = 0;
	}
	f->q[(f->head + f->len) & (f->cap - 1)] = *fr;
	f->len++;
}

static struct frame fifo_pop(struct fifo *f)
{
	struct frame fr = f->q[f->head];

	f->head = (f->head + 1) & (f->cap - 1);
	f->len--;
	return fr;
}

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

static bool ev_before(const struct event *a, const struct event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		fprintf(stderr, "veloz: sim: out of memory\n");
		exit(1);
	}
	return p;
}

static void heap_push(struct heap *h, __u64 t, unsigned int type,
		      unsigned int worker)
{
	struct event ev = { t, h->seq++, type, worker };
	size_t i, parent;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 128;
		h->e = xrealloc(h->e, h->cap * sizeof(*h->e));
	}
	for (i = h->n++; i; i = parent) {
		parent = (i - 1) / 2;
		if (!ev_before(&ev, &h->e[parent]))
			break;
		h->e[i] = h->e[parent];
	}
	h->e[i] = ev;
}

static struct event heap_pop(struct heap *h)
{
	struct event top = h->e[0], last = h->e[--h->n];
	size_t i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && ev_before(&h->e[c + 1], &h->e[c]))
			c++;
		if (!ev_before(&h->e[c], &last))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->n)
		h->e[i] = last;
	return top;
}

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
};

static void usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("veloz: sim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see vz-sim --help)\n", stderr);
	exit(2);
}

static double parse_double(const char *what, const char *s, double min,
			   double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max)
		usage_error("%s must be a number from %g to %g, not '%s'", what,
			    min, max, s);
	return v;
}

static unsigned long long parse_u64(const char *what, const char *s,
				    unsigned long long min,
				    unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		usage_error("%s must be a whole number from %llu to %llu, "
			    "not '%s'",
			    what, min, max, s);
	return v;
}

static int parse_choice(const char *what, const char *s,
			const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	usage_error("unknown %s '%s'", what, s);
}

static const char *const arrival_names[] = { "poisson", "bursty" };
static const char *const service_names[] = { "exp", "const", "heavy" };
static const char *const flow_size_names[] = { "uniform", "heavy" };

static void parse_ramp(struct opts *o, const char *s)
{
	char buf[1024], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		usage_error("--ramp is too long");
	strcpy(buf, s);
	o->nsteps = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsteps == MAX_STEPS)
			usage_error("--ramp takes at most %d steps", MAX_STEPS);
		o->loads[o->nsteps++] =
			parse_double("a --ramp load", tok, 0.001, 4);
	}
	if (!o->nsteps || s[strlen(s) - 1] == ',' || s[0] == ',' ||
	    strstr(s, ",,"))
		usage_error("--ramp wants loads separated by commas, not '%s'",
			    s);
}

static const char help[] =
	"usage: vz-sim [--policy rss-mod|flow-affinity|buckets|adaptive]\n"
	"  [--cores N]"
	"  [--load F | --ramp F,F,..] [--step-ms MS] [--arrivals "
	"poisson|bursty]\n"
	"  [--burst-us US] [--service exp|const|heavy] [--service-us US]\n"
	"  [--flows N] [--flow-sizes uniform|heavy] [--zipf-s S] "
	"[--flow-slots N]\n"
	"  [--alloc] [--wake-us US] [--hold-us US] [--prepopulate] "
	"[--seed N]\n"
	"  [--queue-cap N] [--timeline-us US] [--json] [--verbose]\n"
	"  [--settle-us US] [--max-forced N] [--migrate-gap N] [--force-gap N]\n"
	"  [--migrate-us US] [--dispatch-ns NS] [--scan-ns NS] [--policies]\n"
	"  [--shrink-holdoff-us US]\n"
	"Simulates the dispatch policy code on a generated trace: per-worker\n"
	"FIFO queues, service one frame at a time, latency = completion -\n"
	"arrival. --service heavy is bimodal: 90% short, 10% ten times as\n"
	"long, each constant, same mean. --flow-sizes heavy is Zipf (--zipf-s,\n"
	"default 1.1: the biggest flow carries 1/H(N,s) of the frames).\n"
	"--hold-us: how long buckets waits for a bucket to drain before a\n"
	"forced move (the policy's hold_ns).\n"
	"--queue-cap: frames a worker's queue holds (the afxdp dispatcher's\n"
	"rings hold 4096); a frame that finds it full is lost, as there.\n"
	"0 (the default) never loses one.\n"
	"--migrate-gap, --force-gap: policy.h's gaps (frames); --max-forced:\n"
	"forced moves per rebalance period; --settle-us: buckets' wait after a\n"
	"change of workers. Costs: --dispatch-ns per frame and --scan-ns per\n"
	"worker compared make the dispatcher a server frames queue for;\n"
	"--migrate-us is added to the first frame of a flow on a new worker.\n"
	"--shrink-holdoff-us: the allocator parks no worker this soon after\n"
	"adding one (100).\n"
	"--policies prints the policies as a JSON list.\n";

static void parse_args(struct opts *o, int argc, char **argv)
{
	enum {
		O_POLICY = 256,
		O_CORES,
		O_LOAD,
		O_RAMP,
		O_STEP,
		O_ARR,
		O_BURST,
		O_SVC,
		O_SVC_US,
		O_FLOWS,
		O_FSIZES,
		O_ZIPF,
		O_SLOTS,
		O_ALLOC,
		O_WAKE,
		O_HOLD,
		O_SETTLE,
		O_MAXFORCED,
		O_GAP,
		O_FGAP,
		O_HOLDOFF,
		O_MIGRATE,
		O_DSP_NS,
		O_SCAN_NS,
		O_QCAP,
		O_PREPOP,
		O_SEED,
		O_TL,
		O_JSON,
		O_POLICIES,
		O_VERBOSE,
		O_HELP
	};
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, O_POLICY },
		{ "cores", required_argument, NULL, O_CORES },
		{ "load", required_argument, NULL, O_LOAD },
		{ "ramp", required_argument, NULL, O_RAMP },
		{ "step-ms", required_argument, NULL, O_STEP },
		{ "arrivals", required_argument, NULL, O_ARR },
		{ "burst-us", required_argument, NULL, O_BURST },
		{ "service", required_argument, NULL, O_SVC },
		{ "service-us", required_argument, NULL, O_SVC_US },
		{ "flows", required_argument, NULL, O_FLOWS },
		{ "flow-sizes", required_argument, NULL, O_FSIZES },
		{ "zipf-s", required_argument, NULL, O_ZIPF },
		{ "flow-slots", required_argument, NULL, O_SLOTS },
		{ "alloc", no_argument, NULL, O_ALLOC },
		{ "wake-us", required_argument, NULL, O_WAKE },
		{ "hold-us", required_argument, NULL, O_HOLD },
		{ "settle-us", required_argument, NULL, O_SETTLE },
		{ "max-forced", required_argument, NULL, O_MAXFORCED },
		{ "migrate-gap", required_argument, NULL, O_GAP },
		{ "force-gap", required_argument, NULL, O_FGAP },
		{ "shrink-holdoff-us", required_argument, NULL, O_HOLDOFF },
		{ "migrate-us", required_argument, NULL, O_MIGRATE },
		{ "dispatch-ns", required_argument, NULL, O_DSP_NS },
		{ "scan-ns", required_argument, NULL, O_SCAN_NS },
		{ "queue-cap", required_argument, NULL, O_QCAP },
		{ "prepopulate", no_argument, NULL, O_PREPOP },
		{ "seed", required_argument, NULL, O_SEED },
		{ "timeline-us", required_argument, NULL, O_TL },
		{ "json", no_argument, NULL, O_JSON },
		{ "policies", no_argument, NULL, O_POLICIES },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	bool load_set = false, ramp_set = false;
	unsigned long long v;
	int c;

	*o = (struct opts){
		.policy = VZ_DISPATCH_RSS_MOD,
		.cores = 4,
		.loads = { 0.7 },
		.nsteps = 1,
		.step_ms = 20,
		.arrivals = ARR_POISSON,
		.burst_us = 50,
		.service = SVC_EXP,
		.service_us = 1,
		.flows = 1000,
		.flow_sizes = FS_UNIFORM,
		.zipf_s = 1.1,
		.flow_slots = 1u << 16,
		.wake_us = 5,
		.hold_us = -1,
		.settle_us = -1,
		.max_forced = -1,
		.migrate_gap = -1,
		.force_gap = -1,
		.holdoff_us = -1,
		.seed = 1,
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case O_POLICY:
			c = vz_dispatch_policy_parse(optarg);
			if (c < 0)
				usage_error("unknown policy '%s' (rss-mod, "
					    "flow-affinity, buckets, adaptive)",
					    optarg);
			o->policy = (enum vz_dispatch_policy)c;
			break;
		case O_CORES:
			o->cores = (unsigned int)parse_u64(
				"--cores", optarg, 1, VZ_DISPATCH_MAX_WORKERS);
			break;
		case O_LOAD:
			o->loads[0] = parse_double("--load", optarg, 0.001, 4);
			o->nsteps = 1;
			load_set = true;
			break;
		case O_RAMP:
			parse_ramp(o, optarg);
			ramp_set = true;
			break;
		case O_STEP:
			o->step_ms =
				parse_double("--step-ms", optarg, 0.01, 100000);
			break;
		case O_ARR:
			o->arrivals = parse_choice("arrival process", optarg,
						   arrival_names, 2);
			break;
		case O_BURST:
			o->burst_us =
				parse_double("--burst-us", optarg, 0.01, 1e9);
			break;
		case O_SVC:
			o->service = parse_choice("service distribution",
						  optarg, service_names, 3);
			break;
		case O_SVC_US:
			o->service_us =
				parse_double("--service-us", optarg, 0.01, 1e6);
			break;
		case O_FLOWS:
			o->flows = (unsigned int)parse_u64("--flows", optarg, 1,
							   1u << 24);
			break;
		case O_FSIZES:
			o->flow_sizes =
				parse_choice("flow size distribution", optarg,
					     flow_size_names, 2);
			break;
		case O_ZIPF:
			o->zipf_s = parse_double("--zipf-s", optarg, 0.01, 10);
			break;
		case O_SLOTS:
			v = parse_u64("--flow-slots", optarg, 32, 1u << 26);
			if (v & (v - 1))
				usage_error("--flow-slots must be a power of "
					    "two, not %llu",
					    v);
			o->flow_slots = (unsigned int)v;
			break;
		case O_ALLOC:
			o->alloc = true;
			break;
		case O_WAKE:
			o->wake_us = parse_double("--wake-us", optarg, 0, 1e6);
			break;
		case O_HOLD:
			o->hold_us = parse_double("--hold-us", optarg, 0, 1e9);
			break;
		case O_SETTLE:
			o->settle_us =
				parse_double("--settle-us", optarg, 0, 1e9);
			break;
		case O_MAXFORCED:
			o->max_forced = (long long)parse_u64(
				"--max-forced", optarg, 0, 1u << 20);
			break;
		case O_GAP:
			o->migrate_gap = (long long)parse_u64(
				"--migrate-gap", optarg, 0, 1u << 20);
			break;
		case O_HOLDOFF:
			o->holdoff_us = parse_double("--shrink-holdoff-us",
						     optarg, 0, 1e9);
			break;
		case O_FGAP:
			o->force_gap = (long long)parse_u64(
				"--force-gap", optarg, 0, 1u << 20);
			break;
		case O_MIGRATE:
			o->migrate_us =
				parse_double("--migrate-us", optarg, 0, 1e6);
			break;
		case O_DSP_NS:
			o->dispatch_ns =
				parse_double("--dispatch-ns", optarg, 0, 1e6);
			break;
		case O_SCAN_NS:
			o->scan_ns = parse_double("--scan-ns", optarg, 0, 1e6);
			break;
		case O_QCAP:
			o->queue_cap =
				parse_u64("--queue-cap", optarg, 0, MAX_QUEUED);
			break;
		case O_PREPOP:
			o->prepopulate = true;
			break;
		case O_SEED:
			o->seed = parse_u64("--seed", optarg, 0, ~0ull);
			break;
		case O_TL:
			o->timeline_us = parse_u64("--timeline-us", optarg, 1,
						   1000000000ull);
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_VERBOSE:
			o->verbose = true;
			break;
		case O_POLICIES: /* policy.h's list, for Python */
			for (c = 0; c < VZ_DISPATCH_POLICIES; c++)
				printf("%s\"%s\"", c ? ", " : "[",
				       vz_dispatch_policy_name((unsigned)c));
			puts("]");
			exit(0);
		case O_HELP:
			fputs(help, stdout);
			exit(0);
		case ':':
			usage_error("%s needs a value", argv[optind - 1]);
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (load_set && ramp_set)
		usage_error("--load and --ramp exclude each other");
}

static double service_mean_ns(const struct opts *o)
{
	return o->service_us * 1000;
}

static void set_step_rate(struct trace *tr, const struct opts *o)
{
	tr->rate = o->loads[tr->step] * o->cores / service_mean_ns(o);
}

static void next_switch(struct trace *tr, const struct opts *o)
{
	double mean = o->burst_us * 1000;

	/* Bursts last burst_us on average; the gaps make them 20% of time. */
	if (!tr->on)
		mean *= (1 - BURST_ON) / BURST_ON;
	tr->switch_at = tr->t + rng_exp(&tr->rng, mean);
}

static void trace_init(struct trace *tr, const struct opts *o)
{
	struct rng flow_rng;
	unsigned int i;
	__u8 tuple[12];

	memset(tr, 0, sizeof(*tr));
	rng_seed(&tr->rng, o->seed);
	rng_seed(&flow_rng, o->seed ^ 0x5eed5eed5eedull);
	tr->flows = o->flows;
	tr->hashes = xrealloc(NULL, o->flows * sizeof(*tr->hashes));
	for (i = 0; i < o->flows; i++) {
		__u64 a = rng_next(&flow_rng), b = rng_next(&flow_rng);

		memcpy(tuple, &a, 8); /* source, destination address */
		memcpy(tuple + 8, &b, 4); /* source, destination port */
		tr->hashes[i] = vz_toeplitz(vz_rss_key, tuple, sizeof(tuple));
	}
	if (o->flow_sizes == FS_HEAVY) {
		double sum = 0;

		tr->cdf = xrealloc(NULL, o->flows * sizeof(*tr->cdf));
		for (i = 0; i < o->flows; i++) {
			sum += pow(i + 1, -o->zipf_s);
			tr->cdf[i] = sum;
		}
		for (i = 0; i < o->flows; i++)
			tr->cdf[i] /= sum;
	}
	tr->step_ns = o->step_ms * 1e6;
	set_step_rate(tr, o);
	if (o->arrivals == ARR_BURSTY) {
		tr->on = rng_unit(&tr->rng) < BURST_ON;
		next_switch(tr, o);
	}
}

/* The next arrival's time in ns, or false when the trace is over. */
static bool trace_next(struct trace *tr, const struct opts *o, double *t)
{
	for (;;) {
		double rate = tr->rate, limit, dt;
		bool is_switch;

		if (o->arrivals == ARR_BURSTY)
			rate *= tr->on ? BURST_FACTOR
				       : (1 - BURST_ON * BURST_FACTOR) /
						 (1 - BURST_ON);
		limit = (tr->step + 1) * tr->step_ns;
		is_switch = o->arrivals == ARR_BURSTY && tr->switch_at < limit;
		if (is_switch)
			limit = tr->switch_at;
		dt = rate > 0 ? rng_exp(&tr->rng, 1 / rate) : INFINITY;
		if (tr->t + dt < limit) {
			tr->t += dt;
			*t = tr->t;
			return true;
		}
		/* Memoryless: start afresh at the change of rate. */
		tr->t = limit;
		if (is_switch) {
			tr->on = !tr->on;
			next_switch(tr, o);
			continue;
		}
		if (++tr->step == o->nsteps) {
			tr->over = true;
			return false;
		}
		set_step_rate(tr, o);
	}
}

static unsigned int trace_flow(struct trace *tr)
{
	double u;
	unsigned int lo, hi, mid;

	if (!tr->cdf)
		return (unsigned int)(((__u64)(__u32)rng_next(&tr->rng) *
				       tr->flows) >>
				      32);
	u = rng_unit(&tr->rng);
	for (lo = 0, hi = tr->flows - 1; lo < hi;) {
		mid = (lo + hi) / 2;
		if (tr->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static __u64 trace_service(struct trace *tr, const struct opts *o)
{
	double mean = service_mean_ns(o), s;

	switch (o->service) {
	case SVC_CONST:
		s = mean;
		break;
	case SVC_HEAVY: /* 0.9 short + 0.1 * 10 short = mean */
		s = mean / 1.9;
		if (rng_unit(&tr->rng) < 0.1)
			s *= 10;
		break;
	default:
		s = rng_exp(&tr->rng, mean);
	}
	s = round(s);
	return s < 1 ? 1 : (__u64)s;
}

static unsigned int step_of(const struct sim *s, __u64 t)
{
	__u64 i = t / s->step_ns;

	return i < s->o->nsteps ? (unsigned int)i : s->o->nsteps - 1;
}

/* Integrate the active workers up to `now`, step by step. */
static void account(struct sim *s, __u64 now)
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

static void snapshot(const struct sim *s, struct snapshot *snap)
{
	vz_dispatch_get_stats(s->d, &snap->d);
	snap->a = s->alloc.stats;
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

static void on_handoff(struct sim *s)
{
	s->dsp_busy = false;
	hand_off(s, s->dsp_worker, &s->dsp_cur);
	dispatch_next(s);
}

static void on_arrival(struct sim *s)
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

static void on_done(struct sim *s, unsigned int i)
{
	struct worker *w = &s->w[i];

	vz_dispatch_done(s->d, i, &w->cur.ticket);
	hist_add(&s->steps[step_of(s, w->cur.arrival)].lat,
		 s->now - w->cur.arrival);
	s->in_system--;
	w->busy = false;
	try_serve(s, i);
}

static void set_active(struct sim *s, unsigned int n)
{
	unsigned int i, old = s->active;

	account(s, s->now);
	s->active = n;
	for (i = old; i < n; i++)
		wake(s, i);
	for (i = n; i < old; i++)
		try_serve(s, i); /* an idle one goes to sleep */
}

static void timeline_row(struct sim *s)
{
	unsigned int i, total = 0, most = 0;
	FILE *f = s->timeline;

	for (i = 0; i < s->o->cores; i++) {
		unsigned int q = (unsigned int)s->w[i].wait.len + s->w[i].busy;

		total += q;
		if (q > most)
			most = q;
	}
	if (!s->o->json) {
		fprintf(f, "%12.1f %6u %8u %8u\n", (double)s->now / 1000,
			s->active, total, most);
		s->timeline_rows++;
		return;
	}
	fprintf(f,
		"%s{\"t_us\": %.1f, \"active\": %u, \"queued\": %u, "
		"\"queues\": [",
		s->timeline_rows++ ? ", " : "", (double)s->now / 1000,
		s->active, total);
	for (i = 0; i < s->o->cores; i++)
		fprintf(f, "%s%zu", i ? ", " : "",
			s->w[i].wait.len + (size_t)s->w[i].busy);
	fputs("]}", f);
}

static void on_tick(struct sim *s, __u64 *next_timeline,
		    unsigned int *next_step)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int i, n;

	while (*next_step < s->o->nsteps && s->now >= *next_step * s->step_ns) {
		snapshot(s, &s->steps[*next_step].begin);
		if (*next_step)
			s->steps[*next_step - 1].end =
				s->steps[*next_step].begin;
		++*next_step;
	}
	vz_dispatch_tick(s->d, s->now);
	if (s->o->alloc && s->now >= s->alloc.next_check) {
		for (i = 0; i < s->active; i++)
			if (s->w[i].wait.len) {
				const struct fifo *q = &s->w[i].wait;

				oldest[i] = q->q[q->head].arrival +
					    !q->q[q->head].arrival;
			}
		n = vz_core_alloc_tick(&s->alloc, s->d, s->now, oldest);
		if (n != s->active)
			set_active(s, n);
	}
	if (s->o->timeline_us && s->now >= *next_timeline &&
	    s->now <= s->total_ns) {
		timeline_row(s);
		*next_timeline += s->o->timeline_us * 1000;
	}
	if (!s->tr.over || s->in_system || s->dq.len || s->dsp_busy)
		heap_push(&s->heap, s->now + TICK_NS, EV_TICK, 0);
}

struct summary {
	double load, offered, active_mean, imbalance;
	unsigned int used; /* workers that got frames */
	struct hist *lat;
	__u64 frames, lost, reordered, flows_moved, buckets_moved,
		buckets_forced, flows_forced, cold, compared;
	__u64 grows, shrinks;
	__u64 per_worker[VZ_DISPATCH_MAX_WORKERS];
};

static void summarise(const struct sim *s, unsigned int from, unsigned int to,
		      struct summary *out, struct hist *lat)
{
	const struct opts *o = s->o;
	const struct snapshot *b = &s->steps[from].begin,
			      *e = &s->steps[to - 1].end;
	double work = 0, active = 0, load = 0, mean;
	unsigned int i;
	__u64 most = 0, lost = 0, out_cold = 0;

	memset(lat, 0, sizeof(*lat));
	for (i = from; i < to; i++) {
		hist_merge(lat, &s->steps[i].lat);
		lost += s->steps[i].lost;
		out_cold += s->steps[i].cold;
		work += s->steps[i].work_ns;
		active += s->steps[i].active_ns;
		load += o->loads[i];
	}
	*out = (struct summary){
		.load = load / (to - from),
		.offered = work / ((double)s->step_ns * (to - from) * o->cores),
		.active_mean = active / ((double)s->step_ns * (to - from)),
		.lat = lat,
		.frames = e->d.frames - b->d.frames,
		.lost = lost,
		.reordered = e->d.reordered - b->d.reordered,
		.flows_moved = e->d.flows_moved - b->d.flows_moved,
		.buckets_moved = e->d.buckets_moved - b->d.buckets_moved,
		.buckets_forced = e->d.buckets_forced - b->d.buckets_forced,
		.flows_forced = e->d.flows_forced - b->d.flows_forced,
		.compared = e->d.compared - b->d.compared,
		.grows = e->a.grows - b->a.grows,
		.shrinks = e->a.shrinks - b->a.shrinks,
	};
	out->cold = out_cold;
	for (i = 0; i < o->cores; i++) {
		out->per_worker[i] =
			e->d.frames_per_worker[i] - b->d.frames_per_worker[i];
		if (out->per_worker[i]) {
			out->used++;
			if (out->per_worker[i] > most)
				most = out->per_worker[i];
		}
	}
	/* The busiest worker against an even split over the active ones. */
	mean = out->active_mean ? (double)out->frames / out->active_mean : 0;
	out->imbalance = mean ? (double)most / mean : 0;
}

/*
 * The q-quantile of every frame offered, a lost one counting as slower
 * than any that completed, so a policy cannot hide its overload as loss.
 * JSON null when the quantile falls among the lost frames.
 */
static void print_tail(const struct hist *h, __u64 lost, double q)
{
	double rank = ceil(q * (double)(h->n + lost));

	if (rank > (double)h->n)
		printf("null");
	else
		printf("%.4f", hist_quantile(h, rank / (double)h->n) / 1000);
}

static void print_json_summary(const struct sim *s, const struct summary *x)
{
	const struct hist *h = x->lat;
	unsigned int i;

	printf("{\"load\": %.4f, \"offered\": %.4f, \"frames\": %llu, "
	       "\"lost\": %llu, \"latency_us\": {\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, "
	       "\"p99\": %.4f, \"p999\": %.4f, \"max\": %.4f}, "
	       "\"reordered\": %llu, \"flows_moved\": %llu, "
	       "\"buckets_moved\": %llu, \"buckets_forced\": %llu, "
	       "\"flows_forced\": %llu, \"cold_frames\": %llu, "
	       "\"workers_compared\": %llu, \"reallocations\": %llu, "
	       "\"grows\": %llu, \"shrinks\": %llu, \"active_mean\": %.3f, "
	       "\"imbalance\": %.4f, \"workers_used\": %u, \"share\": [",
	       x->load, x->offered, (unsigned long long)x->frames,
	       (unsigned long long)x->lost,
	       h->n ? h->sum / (double)h->n / 1000 : 0,
	       hist_quantile(h, 0.5) / 1000, hist_quantile(h, 0.9) / 1000,
	       hist_quantile(h, 0.99) / 1000, hist_quantile(h, 0.999) / 1000,
	       (double)h->max / 1000, (unsigned long long)x->reordered,
	       (unsigned long long)x->flows_moved,
	       (unsigned long long)x->buckets_moved,
	       (unsigned long long)x->buckets_forced,
	       (unsigned long long)x->flows_forced, (unsigned long long)x->cold,
	       (unsigned long long)x->compared,
	       (unsigned long long)(x->grows + x->shrinks),
	       (unsigned long long)x->grows, (unsigned long long)x->shrinks,
	       x->active_mean, x->imbalance, x->used);
	for (i = 0; i < s->o->cores; i++)
		printf("%s%.5f", i ? ", " : "",
		       x->frames ? (double)x->per_worker[i] / (double)x->frames
				 : 0);
	printf("], \"tail_us\": {\"p99\": ");
	print_tail(h, x->lost, 0.99);
	printf(", \"p999\": ");
	print_tail(h, x->lost, 0.999);
	printf("}}");
}

static void print_table_row(const char *label, const struct summary *x)
{
	const struct hist *h = x->lat;

	printf("%-5s %5.2f %5.3f %9llu %8llu %7.2f %7.2f %7.2f %8.2f %8.2f "
	       "%9.2f %8llu %7llu %7llu %6llu %6llu %6.2f %6.3f\n",
	       label, x->load, x->offered, (unsigned long long)x->frames,
	       (unsigned long long)x->lost,
	       h->n ? h->sum / (double)h->n / 1000 : 0,
	       hist_quantile(h, 0.5) / 1000, hist_quantile(h, 0.9) / 1000,
	       hist_quantile(h, 0.99) / 1000, hist_quantile(h, 0.999) / 1000,
	       (double)h->max / 1000, (unsigned long long)x->reordered,
	       (unsigned long long)x->flows_moved,
	       (unsigned long long)x->buckets_moved,
	       (unsigned long long)(x->buckets_forced + x->flows_forced),
	       (unsigned long long)(x->grows + x->shrinks), x->active_mean,
	       x->imbalance);
}

static void report(struct sim *s, char *timeline, size_t timeline_len)
{
	const struct opts *o = s->o;
	struct summary x;
	struct hist *lat = xrealloc(NULL, sizeof(*lat));
	unsigned int i;

	if (o->json) {
		printf("{\"policy\": \"%s\", \"cores\": %u, \"alloc\": %s, "
		       "\"prepopulate\": %s, \"arrivals\": \"%s\", "
		       "\"service\": \"%s\", \"service_us\": %g, "
		       "\"flows\": %u, \"flow_sizes\": \"%s\", \"zipf_s\": %g, "
		       "\"step_ms\": %g, \"wake_us\": %g, \"seed\": %llu, "
		       "\"steps\": [",
		       vz_dispatch_policy_name(o->policy), o->cores,
		       o->alloc ? "true" : "false",
		       o->prepopulate ? "true" : "false",
		       arrival_names[o->arrivals], service_names[o->service],
		       o->service_us, o->flows, flow_size_names[o->flow_sizes],
		       o->zipf_s, o->step_ms, o->wake_us, o->seed);
		for (i = 0; i < o->nsteps; i++) {
			summarise(s, i, i + 1, &x, lat);
			if (i)
				printf(", ");
			print_json_summary(s, &x);
		}
		printf("], \"overall\": ");
		summarise(s, 0, o->nsteps, &x, lat);
		print_json_summary(s, &x);
		if (o->timeline_us)
			printf(", \"timeline\": [%.*s]", (int)timeline_len,
			       timeline);
		printf("}\n");
		free(lat);
		return;
	}
	printf("policy %s, %u cores%s%s, %s arrivals, %s service (mean %g "
	       "us), %u flows (%s), %g ms per step, seed %llu\n",
	       vz_dispatch_policy_name(o->policy), o->cores,
	       o->alloc ? ", core allocator" : "",
	       o->prepopulate ? ", prepopulated" : "",
	       arrival_names[o->arrivals], service_names[o->service],
	       o->service_us, o->flows, flow_size_names[o->flow_sizes],
	       o->step_ms, o->seed);
	printf("%-5s %5s %5s %9s %8s %7s %7s %7s %8s %8s %9s %8s %7s %7s %6s "
	       "%6s %6s %6s\n",
	       "step", "load", "offer", "frames", "lost", "mean", "p50", "p90",
	       "p99", "p99.9", "max", "reorder", "flowmv", "bktmv", "forced",
	       "realloc", "active", "imbal");
	for (i = 0; i < o->nsteps; i++) {
		char label[16];

		snprintf(label, sizeof(label), "%u", i + 1);
		summarise(s, i, i + 1, &x, lat);
		print_table_row(label, &x);
	}
	if (o->nsteps > 1) {
		summarise(s, 0, o->nsteps, &x, lat);
		print_table_row("all", &x);
	}
	printf("(latency in us; imbal = busiest worker's frames / frames per "
	       "active worker)\n");
	if (o->timeline_us)
		printf("\n%12s %6s %8s %8s\n%.*s", "t_us", "active", "queued",
		       "longest", (int)timeline_len, timeline);
	free(lat);
}

int main(int argc, char **argv)
{
	struct vz_dispatch_config dcfg;
	struct vz_core_alloc_config acfg;
	struct opts o;
	struct sim s;
	struct timespec t0, t1;
	__u64 next_timeline = 0;
	unsigned int next_step = 0, i;
	char *timeline = NULL;
	size_t timeline_len = 0;
	double first;

	parse_args(&o, argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&s, 0, sizeof(s));
	s.o = &o;
	s.step_ns = (__u64)llround(o.step_ms * 1e6 / TICK_NS) * TICK_NS;
	if (!s.step_ns)
		s.step_ns = TICK_NS;
	s.total_ns = s.step_ns * o.nsteps;
	s.steps = calloc(o.nsteps, sizeof(*s.steps));
	if (!s.steps)
		xrealloc(NULL, (size_t)-1);
	vz_dispatch_config_default(&dcfg, o.policy, o.cores);
	dcfg.flow_slots = o.flow_slots;
	if (o.hold_us >= 0)
		dcfg.hold_ns = (__u64)llround(o.hold_us * 1000);
	if (o.settle_us >= 0)
		dcfg.settle_ns = (__u64)llround(o.settle_us * 1000);
	if (o.max_forced >= 0)
		dcfg.max_forced = (unsigned int)o.max_forced;
	if (o.migrate_gap >= 0)
		dcfg.migrate_gap = (unsigned int)o.migrate_gap;
	if (o.force_gap >= 0)
		dcfg.force_gap = (unsigned int)o.force_gap;
	s.d = vz_dispatch_new(&dcfg);
	if (!s.d)
		return 1;
	s.active = o.cores;
	if (o.alloc) {
		vz_core_alloc_config_default(&acfg, o.cores);
		if (o.holdoff_us >= 0)
			acfg.shrink_holdoff_ns =
				(__u64)llround(o.holdoff_us * 1000);
		vz_dispatch_set_active(s.d, acfg.min_workers);
		if (vz_core_alloc_init(&s.alloc, &acfg, 0))
			return 1;
		s.active = acfg.min_workers;
	}
	for (i = 0; i < s.active; i++)
		s.w[i].awake = true;
	trace_init(&s.tr, &o);
	s.tr.step_ns = (double)s.step_ns;
	s.last_worker = xrealloc(NULL, o.flows);
	memset(s.last_worker, VZ_POLICY_NONE, o.flows);
	if (o.prepopulate &&
	    vz_dispatch_prepopulate(s.d, s.tr.hashes, o.flows, 0)) {
		fprintf(stderr,
			"veloz: sim: the flow table has no room for "
			"%u flows; raise --flow-slots\n",
			o.flows);
		return 1;
	}
	if (o.timeline_us) {
		s.timeline = open_memstream(&timeline, &timeline_len);
		if (!s.timeline)
			xrealloc(NULL, (size_t)-1);
	}
	heap_push(&s.heap, 0, EV_TICK, 0);
	if (trace_next(&s.tr, &o, &first))
		heap_push(&s.heap, (__u64)llround(first), EV_ARRIVAL, 0);
	while (s.heap.n) {
		struct event ev = heap_pop(&s.heap);

		s.now = ev.t;
		s.events++;
		switch (ev.type) {
		case EV_ARRIVAL:
			on_arrival(&s);
			break;
		case EV_DONE:
			on_done(&s, ev.worker);
			break;
		case EV_HANDOFF:
			on_handoff(&s);
			break;
		case EV_WAKE:
			s.w[ev.worker].waking = false;
			s.w[ev.worker].awake = true;
			try_serve(&s, ev.worker);
			break;
		default:
			on_tick(&s, &next_timeline, &next_step);
		}
	}
	account(&s, s.total_ns);
	while (next_step < o.nsteps) { /* steps the ticks never reached */
		snapshot(&s, &s.steps[next_step].begin);
		if (next_step)
			s.steps[next_step - 1].end = s.steps[next_step].begin;
		next_step++;
	}
	snapshot(&s, &s.steps[o.nsteps - 1].end);
	if (s.timeline)
		fclose(s.timeline);
	report(&s, timeline, timeline_len);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (o.verbose) {
		double secs = (double)(t1.tv_sec - t0.tv_sec) +
			      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		struct vz_dispatch_stats st;

		vz_dispatch_get_stats(s.d, &st);
		fprintf(stderr,
			"veloz: sim: %llu frames, %llu events in %.3f s: "
			"%.2f M frames/s\n",
			(unsigned long long)st.frames,
			(unsigned long long)s.events, secs,
			(double)st.frames / secs / 1e6);
	}
	for (i = 0; i < VZ_DISPATCH_MAX_WORKERS; i++)
		free(s.w[i].wait.q);
	free(s.heap.e);
	free(s.dq.q);
	free(s.last_worker);
	free(s.steps);
	free(s.tr.hashes);
	free(s.tr.cdf);
	free(timeline);
	vz_dispatch_free(s.d);
	return 0;
}
