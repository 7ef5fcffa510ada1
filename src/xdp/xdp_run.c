// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-xdp run: an NF on live interfaces at the XDP hook (native or generic).
 * This file is its command line: the option table, its checks and usage. The
 * backend is src/xdp/xdp_backend.c, run by the one runner
 * (src/runner/runner.c) as afxdp and dpdk are. Detaches on SIGINT,
 * SIGTERM, SIGHUP or after --duration (and when stdout goes away), unless
 * --persist; refuses, or with --replace removes, a program a killed run
 * left behind; adopts one a --persist run left, or with --take-over a
 * running run's (src/xdp/xdp_adopt.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/run_options.h"
#include "dispatch/policy.h"
#include "ctl/nf.h"
#include "xdp/xdp_backend.h"

static const char xdp_usage[] =
	"usage: vz-xdp run --bpf NF.bpf.o --native NF.so --iface IF "
	"[--iface IF]...\n"
	"                  [--mode native|skb] [--set KEY=VALUE]... "
	"[--json]\n"
	"                  [--interval S] [--duration S] [--replace]\n"
	"                  [--ops FILE] [--dispatch rss-mod|flow-affinity|"
	"buckets --workers N [--alloc]]\n"
	"                  [--ctl-group GROUP] [--ctl-idle-timeout S]\n"
	"                  [--persist] [--take-over]\n";

/* What the command line gives besides struct vz_xdp_run's own fields. */
static struct vz_nf_args cli;

static const char *const mode_names[] = { "native", "skb", NULL };
static const int mode_values[] = { XDP_MODE_NATIVE, XDP_MODE_SKB };

/* --iface, once per port. */
static int opt_iface(const struct vz_option *opt, const char *text, void *dst,
		     void *cfg)
{
	struct vz_xdp_run *r = cfg;

	(void)opt;
	(void)dst;
	if (r->nports == VZ_MAX_PORTS) {
		vz_err("at most %d ports", VZ_MAX_PORTS);
		return -EINVAL;
	}
	r->ports[r->nports++].ifname = text;
	return 0;
}

_Static_assert(VZ_MAX_SETS == VZ_OPT_LIST_MAX, "--set holds VZ_MAX_SETS");

#define XDP_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct vz_xdp_run, member, __VA_ARGS__)

static struct vz_option xdp_options[] = {
	VZ_NF_OPTIONS(&cli),
	XDP_OPT("iface", VZ_OPT_CUSTOM, ports, .parse = opt_iface,
		.required = true, .repeat = true, .type_name = "ifname",
		.metavar = "IF", .help = "a port (once per port)"),
	XDP_OPT("mode", VZ_OPT_ENUM, mode, .choices = mode_names,
		.values = mode_values, .metavar = "native|skb",
		.help = "XDP attach mode"),
	VZ_RUN_OPTIONS(struct vz_xdp_run),
	XDP_OPT("dispatch", VZ_OPT_ENUM, policy,
		.choices = vz_dispatch_policy_names,
		.nchoices = VZ_DISPATCH_POLICIES, .metavar = "POLICY",
		.help = "a dispatch stage spreads flows over --workers CPUs"),
	XDP_OPT("persist", VZ_OPT_FLAG, persist,
		.help = "stopping leaves the NF attached; the next run "
			"adopts it"),
	XDP_OPT("take-over", VZ_OPT_FLAG, take_over,
		.help = "adopt the NF a running run (or a killed one) has "
			"on the ports; the running run leaves"),
	XDP_OPT("workers", VZ_OPT_U64, workers, .min = 0, .max = 1u << 20,
		.no_default = true, .metavar = "N",
		.help = "CPUs behind the dispatcher (1)"),
	VZ_OPTION_END,
};

static const struct vz_opts xdp_opts = {
	.prog = "vz-xdp",
	.usage = xdp_usage,
	.table = xdp_options,
	.subcommand = "run",
};

static int parse_args(struct vz_xdp_run *r, int argc, char **argv,
		      const char **bpf_path, const char **native_path,
		      char **sets, int *nsets)
{
	if (vz_opts_parse(&xdp_opts, r, argc, argv, NULL))
		return 2;
	*bpf_path = cli.bpf_path;
	*native_path = cli.native_path;
	memcpy(sets, cli.sets.v, sizeof(*sets) * (size_t)cli.sets.n);
	*nsets = cli.sets.n;
	r->workers_given = vz_opts_given(&xdp_opts, "workers");
	if (r->workers_given && r->policy < 0) {
		vz_err("--workers goes with --dispatch on xdp");
		return 2;
	}
	if (r->alloc && r->policy < 0) {
		vz_err("--alloc goes with --dispatch");
		return 2;
	}
	if ((r->persist || r->take_over) && r->policy >= 0) {
		vz_err("--%s does not go with --dispatch",
		       r->persist ? "persist" : "take-over");
		return 2;
	}
	if (r->take_over && r->replace) {
		vz_err("--take-over adopts what --replace would remove: one "
		       "or the other");
		return 2;
	}
	if (r->policy >= 0 && !r->workers_given)
		r->workers = 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *bpf_path = NULL, *native_path = NULL;
	static struct vz_xdp_run r;
	char *sets[VZ_MAX_SETS];
	int nsets = 0, ret;

	vz_xdp_run_defaults(&r);
	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	ret = parse_args(&r, argc, argv, &bpf_path, &native_path, sets, &nsets);
	if (ret)
		return ret;
	return vz_xdp_run(&r, bpf_path, native_path, sets, nsets);
}
