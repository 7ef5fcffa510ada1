// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-xdp run: an NF on live interfaces at the XDP hook (native or generic).
 * This file is its command line: the options, their checks and usage. The
 * backend is src/xdp/xdp_backend.c, run by the one runner
 * (src/runtime/runner.c) as afxdp and dpdk are. Detaches on SIGINT,
 * SIGTERM, SIGHUP or after --duration (and when stdout goes away);
 * refuses, or with --replace removes, a program a killed run left behind.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "runtime/nf.h"
#include "xdp/xdp_backend.h"

/* parse_args' name for vz-xdp's options (helper `options` rewrites it) */
#define runner vz_xdp_run

static void usage(FILE *out)
{
	fprintf(out,
		"usage: vz-xdp run --bpf NF.bpf.o --native NF.so --iface IF "
		"[--iface IF]...\n"
		"                  [--mode native|skb] [--set KEY=VALUE]... "
		"[--json]\n"
		"                  [--interval S] [--duration S] [--replace]\n"
		"                  [--ops FILE] [--dispatch rss-mod|flow-affinity|"
		"buckets --workers N [--alloc]]\n"
		"                  [--ctl-group GROUP]\n");
}

static int parse_args(struct runner *r, int argc, char **argv,
		      const char **bpf_path, const char **native_path,
		      char **sets, int *nsets)
{
	static const struct option options[] = {
		{ "bpf", required_argument, NULL, 'b' },
		{ "native", required_argument, NULL, 'n' },
		{ "iface", required_argument, NULL, 'i' },
		{ "mode", required_argument, NULL, 'm' },
		{ "set", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "replace", no_argument, NULL, 'r' },
		{ "ops", required_argument, NULL, 'p' },
		{ "dispatch", required_argument, NULL, 'D' },
		{ "workers", required_argument, NULL, 'w' },
		{ "alloc", no_argument, NULL, 'A' },
		{ "ctl-group", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	__u64 workers;
	int opt;

	if (argc < 2 || strcmp(argv[1], "run")) {
		usage(stderr);
		return 2;
	}
	optind = 2;
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (opt) {
		case 'b':
			*bpf_path = optarg;
			break;
		case 'n':
			*native_path = optarg;
			break;
		case 'i':
			if (r->nports == VZ_MAX_PORTS) {
				vz_err("at most %d ports", VZ_MAX_PORTS);
				return 2;
			}
			r->ports[r->nports++].ifname = optarg;
			break;
		case 'm':
			if (!strcmp(optarg, "native")) {
				r->mode = XDP_MODE_NATIVE;
			} else if (!strcmp(optarg, "skb")) {
				r->mode = XDP_MODE_SKB;
			} else {
				vz_err("XDP mode must be native or skb, not "
				       "'%s'",
				       optarg);
				return 2;
			}
			break;
		case 's':
			if (*nsets == VZ_MAX_SETS) {
				vz_err("at most %d config settings",
				       VZ_MAX_SETS);
				return 2;
			}
			sets[(*nsets)++] = optarg;
			break;
		case 'j':
			r->json = true;
			break;
		case 't':
		case 'd':
			if (vz_parse_seconds(
				    opt == 't' ? "--interval" : "--duration",
				    optarg,
				    opt == 't' ? &r->interval : &r->duration))
				return 2;
			break;
		case 'r':
			r->replace = true;
			break;
		case 'p':
			r->ops_path = optarg;
			break;
		case 'D':
			r->policy = vz_xdp_dispatch_policy_parse(optarg);
			if (r->policy < 0) {
				vz_err("unknown dispatch policy '%s' (rss-mod, "
				       "flow-affinity or buckets)",
				       optarg);
				return 2;
			}
			break;
		case 'w':
			if (vz_parse_u64("--workers", optarg, 0, 1u << 20,
					 &workers))
				return 2;
			r->workers = (unsigned int)workers;
			r->workers_given = true;
			break;
		case 'A':
			r->alloc = true;
			break;
		case 'g':
			if (vz_parse_group("--ctl-group", optarg, &r->ctl_gid))
				return 2;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!*bpf_path || !*native_path || !r->nports || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (r->workers_given && r->policy < 0) {
		vz_err("--workers goes with --dispatch on xdp");
		return 2;
	}
	if (r->alloc && r->policy < 0) {
		vz_err("--alloc goes with --dispatch");
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
