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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/options.h"
#include "dispatch/dispatch.h"
#include "dispatch/sim/sim.h"

const char *const arrival_names[] = { "poisson", "bursty" };
const char *const service_names[] = { "exp", "const", "heavy" };
const char *const flow_size_names[] = { "uniform", "heavy" };

/* --load's limits, which each load of --ramp has too. */
#define LOAD_MIN 0.001
#define LOAD_MAX 4.0

/* policy.h names the policies: the table takes them from there. */
static int parse_policy(const struct vz_option *opt, const char *text,
			void *dst, void *cfg)
{
	int p = vz_dispatch_policy_parse(text);

	(void)cfg;
	if (p < 0) {
		vz_err("--%s: unknown value '%s' (rss-mod, flow-affinity, "
		       "buckets, adaptive)",
		       opt->name, text);
		return -EINVAL;
	}
	*(enum vz_dispatch_policy *)dst = (enum vz_dispatch_policy)p;
	return 0;
}

/* "F,F,..": one load step each, every one in --load's range. */
static int parse_ramp(const struct vz_option *opt, const char *text, void *dst,
		      void *cfg)
{
	struct opts *o = cfg;
	const char *p = text;
	char *end;
	double v;

	(void)dst;
	o->nsteps = 0;
	for (;;) {
		if (o->nsteps == MAX_STEPS) {
			vz_err("--%s takes at most %d steps", opt->name,
			       MAX_STEPS);
			return -EINVAL;
		}
		errno = 0;
		v = strtod(p, &end);
		/* NaN compares false with everything: test for what is wanted
		 */
		if (errno || end == p || (*end && *end != ',') ||
		    !(v >= LOAD_MIN && v <= LOAD_MAX)) {
			vz_err("--%s wants loads from %g to %g separated by "
			       "commas, not '%s'",
			       opt->name, LOAD_MIN, LOAD_MAX, text);
			return -EINVAL;
		}
		o->loads[o->nsteps++] = v;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

/* policy.h's list, for Python; exits like --help. */
static int print_policies(const struct vz_option *opt, const char *text,
			  void *dst, void *cfg)
{
	unsigned int i;

	(void)opt, (void)text, (void)dst, (void)cfg;
	for (i = 0; i < VZ_DISPATCH_POLICIES; i++)
		printf("%s\"%s\"", i ? ", " : "[", vz_dispatch_policy_name(i));
	puts("]");
	exit(0);
}

#define SIM_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct opts, member, __VA_ARGS__)
#define US_MAX 1e9 /* a wait in simulated us: about 17 minutes */
#define GAP_MAX (1u << 20) /* policy.h's gaps and counts, in frames */

static struct vz_option sim_options[] = {
	SIM_OPT("policy", VZ_OPT_CUSTOM, policy, .parse = parse_policy,
		.type_name = "policy", .metavar = "NAME",
		.help = "rss-mod, flow-affinity, buckets or adaptive"),
	SIM_OPT("cores", VZ_OPT_U64, cores, .min = 1,
		.max = VZ_DISPATCH_MAX_WORKERS, .metavar = "N",
		.help = "workers"),
	SIM_OPT("load", VZ_OPT_DOUBLE, loads[0], .dmin = LOAD_MIN,
		.dmax = LOAD_MAX, .metavar = "F",
		.help = "offered load, a fraction of the workers' capacity"),
	SIM_OPT("ramp", VZ_OPT_CUSTOM, loads, .parse = parse_ramp,
		.type_name = "loads", .metavar = "F,F,..",
		.help = "loads raised in steps, each --load's range"),
	SIM_OPT("step-ms", VZ_OPT_DOUBLE, step_ms, .dmin = 0.01, .dmax = 100000,
		.metavar = "MS", .help = "simulated time per load step"),
	SIM_OPT("arrivals", VZ_OPT_ENUM, arrivals, .choices = arrival_names,
		.nchoices = 2, .help = "arrival process: poisson or bursty"),
	SIM_OPT("burst-us", VZ_OPT_DOUBLE, burst_us, .dmin = 0.01,
		.dmax = US_MAX, .metavar = "US", .help = "bursty: mean burst"),
	SIM_OPT("service", VZ_OPT_ENUM, service, .choices = service_names,
		.nchoices = 3, .help = "service times: exp, const or heavy"),
	SIM_OPT("service-us", VZ_OPT_DOUBLE, service_us, .dmin = 0.01,
		.dmax = 1e6, .metavar = "US", .help = "mean service time"),
	SIM_OPT("flows", VZ_OPT_U64, flows, .min = 1, .max = 1u << 24,
		.metavar = "N", .help = "flows in the trace"),
	SIM_OPT("flow-sizes", VZ_OPT_ENUM, flow_sizes,
		.choices = flow_size_names, .nchoices = 2,
		.help = "frames per flow: uniform or heavy"),
	SIM_OPT("zipf-s", VZ_OPT_DOUBLE, zipf_s, .dmin = 0.01, .dmax = 10,
		.metavar = "S", .help = "heavy flow sizes: Zipf exponent"),
	SIM_OPT("flow-slots", VZ_OPT_U64, flow_slots, .min = 32,
		.max = 1u << 26, .metavar = "N",
		.help = "flow table slots, a power of two"),
	SIM_OPT("alloc", VZ_OPT_FLAG, alloc,
		.help = "the core allocator grows and shrinks the workers"),
	SIM_OPT("wake-us", VZ_OPT_DOUBLE, wake_us, .dmin = 0, .dmax = 1e6,
		.metavar = "US", .help = "a parked worker's wake-up time"),
	SIM_OPT("hold-us", VZ_OPT_DOUBLE, hold_us, .dmin = 0, .dmax = US_MAX,
		.no_default = true, .metavar = "US",
		.help = "buckets: longest wait before a forced move"),
	SIM_OPT("settle-us", VZ_OPT_DOUBLE, settle_us, .dmin = 0,
		.dmax = US_MAX, .no_default = true, .metavar = "US",
		.help = "buckets: wait after a change of workers"),
	SIM_OPT("max-forced", VZ_OPT_U64, max_forced, .max = GAP_MAX,
		.no_default = true, .metavar = "N",
		.help = "forced moves per rebalance period"),
	SIM_OPT("migrate-gap", VZ_OPT_U64, migrate_gap, .max = GAP_MAX,
		.no_default = true, .metavar = "N",
		.help = "policy.h's migrate gap, in frames"),
	SIM_OPT("force-gap", VZ_OPT_U64, force_gap, .max = GAP_MAX,
		.no_default = true, .metavar = "N",
		.help = "policy.h's force gap, in frames"),
	SIM_OPT("shrink-holdoff-us", VZ_OPT_DOUBLE, holdoff_us, .dmin = 0,
		.dmax = US_MAX, .no_default = true, .metavar = "US",
		.help = "the allocator parks no worker this soon after adding"),
	SIM_OPT("migrate-us", VZ_OPT_DOUBLE, migrate_us, .dmin = 0, .dmax = 1e6,
		.metavar = "US", .help = "added to a moved flow's first frame"),
	SIM_OPT("dispatch-ns", VZ_OPT_DOUBLE, dispatch_ns, .dmin = 0,
		.dmax = 1e6, .metavar = "NS",
		.help = "the dispatcher's own time per frame"),
	SIM_OPT("scan-ns", VZ_OPT_DOUBLE, scan_ns, .dmin = 0, .dmax = 1e6,
		.metavar = "NS", .help = "its time per worker compared"),
	SIM_OPT("queue-cap", VZ_OPT_U64, queue_cap, .max = MAX_QUEUED,
		.metavar = "N", .help = "frames a worker queues; 0: no bound"),
	SIM_OPT("prepopulate", VZ_OPT_FLAG, prepopulate,
		.help = "fill the flow table with the trace's flows first"),
	SIM_OPT("seed", VZ_OPT_U64, seed, .max = ~0ull, .metavar = "N",
		.help = "trace seed"),
	SIM_OPT("timeline-us", VZ_OPT_U64, timeline_us, .min = 1,
		.max = 1000000000ull, .no_default = true, .metavar = "US",
		.help = "also sample the queues every US"),
	SIM_OPT("json", VZ_OPT_FLAG, json, .help = "the result as JSON"),
	SIM_OPT("verbose", VZ_OPT_FLAG, verbose,
		.help = "the simulator's own speed, on stderr"),
	SIM_OPT("progress", VZ_OPT_FLAG, progress,
		.help = "lines 'progress DONE TOTAL' (simulated us) on stderr"),
	/* for python/veloz/lab/sim.py, not a person: not in --help */
	SIM_OPT("policies", VZ_OPT_FLAG, alloc, .parse = print_policies,
		.hidden = true),
	VZ_OPTION_END,
};

static const struct vz_opts sim_opts = {
	.prog = "vz-sim",
	.usage = "usage: vz-sim [OPTION]...\n"
		 "Simulates the dispatch policy code on a generated trace: "
		 "per-worker\nFIFO queues, service one frame at a time, "
		 "latency = completion -\narrival.\n",
	.epilog =
		"--service heavy is bimodal: 90% short, 10% ten times as\n"
		"long, each constant, same mean. --flow-sizes heavy is Zipf "
		"(--zipf-s,\ndefault 1.1: the biggest flow carries 1/H(N,s) of "
		"the frames).\n"
		"--hold-us: how long buckets waits for a bucket to drain "
		"before a\nforced move (the policy's hold_ns).\n"
		"--queue-cap: the afxdp dispatcher's rings hold 4096; a frame "
		"that\nfinds the queue full is lost, as there.\n"
		"--migrate-gap, --force-gap: policy.h's gaps (frames); "
		"--settle-us:\nbuckets' wait after a change of workers. Costs: "
		"--dispatch-ns per\nframe and --scan-ns per worker compared "
		"make the dispatcher a server\nframes queue for; --migrate-us "
		"is added to the first frame of a flow\non a new worker.\n",
	.table = sim_options,
};

static int parse_args(struct opts *o, int argc, char **argv)
{
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
	if (vz_opts_parse(&sim_opts, o, argc, argv, NULL))
		return -EINVAL;
	if (o->flow_slots & (o->flow_slots - 1)) {
		vz_err("vz-sim: --flow-slots must be a power of two, not %u",
		       o->flow_slots);
		return -EINVAL;
	}
	if (vz_opts_given(&sim_opts, "load") &&
	    vz_opts_given(&sim_opts, "ramp")) {
		vz_err("vz-sim: --load and --ramp exclude each other");
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct sim s;
	double t0, secs;
	char *timeline = NULL;
	size_t timeline_len = 0;

	if (parse_args(&o, argc, argv))
		return 2;
	t0 = vz_now_s();
	if (sim_init(&s, &o, &timeline, &timeline_len))
		return 1;
	sim_run(&s);
	report(&s, timeline, timeline_len);
	secs = vz_now_s() - t0;
	if (o.verbose) {
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
