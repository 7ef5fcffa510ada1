// SPDX-License-Identifier: BSD-2-Clause
/*
 * `run`'s command line for the userspace backends (afxdp, dpdk): the
 * options, their checks and usage. The run itself is the one runner's
 * (src/runtime/runner.c), as for xdp.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/parse.h"
#include "common/peercred.h"
#include "dispatch/dispatch.h" /* parse_args: --dispatch's names */
#include "runtime/userspace.h"

static void usage(const struct vz_backend *be, FILE *out)
{
	const char *const *opt;

	fprintf(out,
		"usage: vz-%s run --bpf NF.bpf.o --native NF.so --iface IF "
		"[--iface IF]...\n"
		"         [--set KEY=VALUE]... [--json] [--interval S] "
		"[--duration S] [--replace]\n"
		"         [--workers N] [--queues N] [--batch N] [--ops FILE]"
		" [--ctl-group GROUP]",
		be->name);
	for (opt = be->options; opt && *opt; opt++)
		fprintf(out, " %s", *opt);
	fprintf(out, "\n");
}

static int parse_count(const char *what, const char *text, __u64 max,
		       unsigned int *out)
{
	__u64 value;

	if (vz_parse_u64(what, text, 1, max, &value))
		return 2;
	*out = (unsigned int)value;
	return 0;
}

static int parse_seconds(const char *what, const char *text, double *out)
{
	char option[32];

	snprintf(option, sizeof(option), "--%s", what);
	return vz_parse_seconds(option, text, out) ? 2 : 0;
}

/* Does the backend take --name (as written in its usage list)? */
static bool backend_has(const struct vz_backend *be, const char *name)
{
	const char *const *opt, *at;
	size_t len = strlen(name);

	for (opt = be->options; opt && *opt; opt++)
		for (at = strstr(*opt, "--"); at; at = strstr(at + 2, "--"))
			if (!strncmp(at + 2, name, len) &&
			    strchr("]| ", at[2 + len]))
				return true;
	return false;
}

enum {
	OPT_BPF = 256,
	OPT_NATIVE,
	OPT_IFACE,
	OPT_SET,
	OPT_JSON,
	OPT_INTERVAL,
	OPT_DURATION,
	OPT_REPLACE,
	OPT_WORKERS,
	OPT_QUEUES,
	OPT_BATCH,
	OPT_OPS,
	OPT_CTL_GROUP,
	OPT_BUSY_POLL, /* from here on: options of some backends only */
	OPT_COPY,
	OPT_ZEROCOPY,
	OPT_MODE,
	OPT_PMD,
	OPT_NO_HUGE,
	OPT_DISPATCH,
	OPT_ALLOC,
};

static int parse_args(struct vz_us_run *run, int argc, char **argv,
		      const char **bpf_path, const char **native_path,
		      char **sets, int *nsets)
{
	static const struct option options[] = {
		{ "bpf", required_argument, NULL, OPT_BPF },
		{ "native", required_argument, NULL, OPT_NATIVE },
		{ "iface", required_argument, NULL, OPT_IFACE },
		{ "set", required_argument, NULL, OPT_SET },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "interval", required_argument, NULL, OPT_INTERVAL },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "replace", no_argument, NULL, OPT_REPLACE },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "queues", required_argument, NULL, OPT_QUEUES },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "busy-poll", no_argument, NULL, OPT_BUSY_POLL },
		{ "copy", no_argument, NULL, OPT_COPY },
		{ "zero-copy", no_argument, NULL, OPT_ZEROCOPY },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "pmd", required_argument, NULL, OPT_PMD },
		{ "no-huge", no_argument, NULL, OPT_NO_HUGE },
		{ "dispatch", required_argument, NULL, OPT_DISPATCH },
		{ "alloc", no_argument, NULL, OPT_ALLOC },
		{ "ops", required_argument, NULL, OPT_OPS },
		{ "ctl-group", required_argument, NULL, OPT_CTL_GROUP },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const struct vz_backend *be = run->backend;
	int opt, index;

	if (argc < 2 || strcmp(argv[1], "run")) {
		usage(be, stderr);
		return 2;
	}
	optind = 2;
	while ((opt = getopt_long(argc, argv, "+h", options, &index)) != -1) {
		if (opt >= OPT_BUSY_POLL && opt != 'h' &&
		    !backend_has(be, options[index].name)) {
			vz_err("--%s is not an option of the %s backend",
			       options[index].name, be->name);
			return 2;
		}
		switch (opt) {
		case OPT_BPF:
			*bpf_path = optarg;
			break;
		case OPT_NATIVE:
			*native_path = optarg;
			break;
		case OPT_IFACE:
			if (run->nports == VZ_MAX_PORTS) {
				vz_err("at most %d ports", VZ_MAX_PORTS);
				return 2;
			}
			run->ports[run->nports++].ifname = optarg;
			break;
		case OPT_SET:
			if (*nsets == VZ_MAX_SETS) {
				vz_err("at most %d config settings",
				       VZ_MAX_SETS);
				return 2;
			}
			sets[(*nsets)++] = optarg;
			break;
		case OPT_JSON:
			run->json = true;
			break;
		case OPT_INTERVAL:
			if (parse_seconds("interval", optarg, &run->interval))
				return 2;
			break;
		case OPT_DURATION:
			if (parse_seconds("duration", optarg, &run->duration))
				return 2;
			break;
		case OPT_REPLACE:
			run->replace = true;
			break;
		case OPT_WORKERS:
			if (parse_count("--workers", optarg, VZ_MAX_WORKERS,
					&run->workers))
				return 2;
			break;
		case OPT_QUEUES:
			if (parse_count("--queues", optarg, VZ_MAX_WORKERS,
					&run->queues))
				return 2;
			break;
		case OPT_BATCH:
			if (parse_count("--batch", optarg, VZ_US_BATCH_MAX,
					&run->batch))
				return 2;
			break;
		case OPT_BUSY_POLL:
			run->busy_poll = true;
			break;
		case OPT_COPY:
		case OPT_ZEROCOPY:
			run->copy =
				opt == OPT_COPY ? VZ_XSK_COPY : VZ_XSK_ZEROCOPY;
			break;
		case OPT_MODE:
			if (!strcmp(optarg, "native")) {
				run->steer_mode = XDP_MODE_NATIVE;
			} else if (!strcmp(optarg, "skb")) {
				run->steer_mode = XDP_MODE_SKB;
			} else {
				vz_err("--mode must be native or skb, not '%s'",
				       optarg);
				return 2;
			}
			break;
		case OPT_PMD:
			if (strcmp(optarg, "af_xdp") &&
			    strcmp(optarg, "af_packet") &&
			    strcmp(optarg, "eal")) {
				vz_err("--pmd must be af_xdp, af_packet or eal, "
				       "not '%s'",
				       optarg);
				return 2;
			}
			run->pmd = optarg;
			break;
		case OPT_NO_HUGE:
			run->no_huge = true;
			break;
		case OPT_OPS:
			run->ops_path = optarg;
			break;
		case OPT_DISPATCH:
			run->dispatch = vz_dispatch_policy_parse(optarg);
			if (run->dispatch < 0) {
				vz_err("--dispatch must be rss-mod, "
				       "flow-affinity or buckets, not '%s'",
				       optarg);
				return 2;
			}
			break;
		case OPT_ALLOC:
			run->alloc = true;
			break;
		case OPT_CTL_GROUP:
			if (vz_parse_group("--ctl-group", optarg,
					   &run->ctl_gid))
				return 2;
			break;
		case 'h':
			usage(be, stdout);
			exit(0);
		default:
			usage(be, stderr);
			return 2;
		}
	}
	if (optind < argc && !strcmp(argv[optind - 1], "--")) {
		run->extra_args = &argv[optind];
		run->nextra = argc - optind;
	} else if (optind != argc) {
		usage(be, stderr);
		return 2;
	}
	if (!*bpf_path || !*native_path || !run->nports) {
		usage(be, stderr);
		return 2;
	}
	if (run->alloc && run->dispatch < 0) {
		vz_err("--alloc goes with --dispatch");
		return 2;
	}
	if (!run->queues) /* dispatching, one thread takes every queue */
		run->queues = run->dispatch >= 0 ? 1 : run->workers;
	if (run->dispatch < 0 && run->workers > run->queues) {
		vz_err("--workers %u is more than --queues %u: a queue has one "
		       "worker",
		       run->workers, run->queues);
		return 2;
	}
	return 0;
}

int vz_us_main(int argc, char **argv, const struct vz_backend *backend)
{
	struct vz_us_run *run = calloc(1, sizeof(*run));
	const char *bpf_path = NULL, *native_path = NULL;
	char *sets[VZ_MAX_SETS];
	int nsets = 0, ret;

	if (!run)
		return 1;
	vz_run_init(run, backend);
	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	ret = parse_args(run, argc, argv, &bpf_path, &native_path, sets,
			 &nsets);
	if (!ret)
		ret = vz_run(run, bpf_path, native_path, sets, nsets);
	free(run);
	return ret;
}
