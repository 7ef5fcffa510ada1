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
 *
 * This file holds the options and main; sim.h says where the rest is.
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

#include "dispatch/dispatch.h"
#include "dispatch/sim/sim.h"

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

const char *const arrival_names[] = { "poisson", "bursty" };
const char *const service_names[] = { "exp", "const", "heavy" };
const char *const flow_size_names[] = { "uniform", "heavy" };

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

int main(int argc, char **argv)
{
	struct opts o;
	struct sim s;
	struct timespec t0, t1;
	char *timeline = NULL;
	size_t timeline_len = 0;

	parse_args(&o, argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sim_init(&s, &o, &timeline, &timeline_len))
		return 1;
	sim_run(&s);
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
	sim_free(&s);
	free(timeline);
	return 0;
}
