// SPDX-License-Identifier: BSD-2-Clause
/*
 * `run` for the userspace backends (afxdp, dpdk): everything but the port.
 * Refuses bad input before touching an interface; claims each interface
 * (lock, stale program check); opens the NF natively with one copy of its
 * per-CPU maps per worker; gives each port a TAP for PASS; lets the backend
 * open its ports and start its workers; prints counters; stops on SIGINT,
 * SIGTERM, SIGHUP, SIGPIPE, --duration or a vanished interface, and undoes
 * everything in reverse order.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/iface.h"
#include "common/peercred.h"
#include "dispatch/dispatch.h" /* parse_args: --dispatch's names */
#include "runtime/clock.h"
#include "runtime/counters.h"
#include "runtime/ports.h"
#include "runtime/userspace.h"
#include "runtime/xdp_attach.h"

static struct vz_us_run *signalled_run;

static void on_signal(int sig)
{
	(void)sig;
	if (signalled_run)
		signalled_run->stop = 1;
}

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

void vz_us_worker_enter(unsigned int worker)
{
	vz_worker_id = worker;
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

static int read_link(struct vz_us_port *port)
{
	int ret = vz_iface_mac(port->ifname, port->mac);

	if (!ret)
		ret = vz_iface_mtu(port->ifname, &port->mtu);
	port->rx_queues = vz_iface_rx_queues(port->ifname);
	if (ret)
		errno = -ret; /* the caller says strerror(errno) */
	return ret;
}

/* --pmd eal: ports are what EAL probes, named by DPDK name or PCI address. */
static bool dpdk_named_ports(const struct vz_us_run *run)
{
	return !strcmp(run->backend->name, "dpdk") && !strcmp(run->pmd, "eal");
}

/* Everything about the interfaces that can be refused before touching them. */
static int check_ifaces(struct vz_us_run *run)
{
	struct vz_us_port *port;
	int i, j;

	for (i = 0; i < run->nports; i++) {
		port = &run->ports[i];
		port->ifindex = (int)if_nametoindex(port->ifname);
		if (!port->ifindex && dpdk_named_ports(run)) {
			/*
			 * A DPDK port with no kernel interface (a NIC bound
			 * to vfio-pci): DPDK holds it alone and tells its
			 * address; EAL says if there is no such port.
			 */
			port->rx_queues = VZ_MAX_WORKERS;
			continue;
		}
		if (!port->ifindex) {
			vz_err("no interface '%s' in this network namespace",
			       port->ifname);
			return 2;
		}
		for (j = 0; j < i; j++)
			if (run->ports[j].ifindex == port->ifindex) {
				vz_err("interface %s given twice",
				       port->ifname);
				return 2;
			}
		if (read_link(port)) {
			vz_err("cannot read %s's address: %s", port->ifname,
			       strerror(errno));
			return 2;
		}
		if ((unsigned int)port->rx_queues < run->queues) {
			vz_err("%s has %d receive queue%s; --queues %u needs "
			       "as many (ethtool -L %s combined %u)",
			       port->ifname, port->rx_queues,
			       port->rx_queues == 1 ? "" : "s", run->queues,
			       port->ifname, run->queues);
			return 2;
		}
	}
	return 0;
}

/* ---- counters --------------------------------------------------------------
 */

static void take_snapshot(struct vz_us_run *run, struct vz_snapshot *s)
{
	struct vz_map *stats = vz_native_map(&run->nf.native, "vz_stats");
	struct vz_map *redirects =
		vz_native_map(&run->nf.native, "vz_redirects");
	static struct vz_counts worker[VZ_MAX_WORKERS];
	struct vz_stat copies[VZ_MAX_WORKERS];
	unsigned int w;
	__u32 v, p;

	memset(s, 0, sizeof(*s));
	memset(worker, 0, sizeof(worker));
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		vz_map_read(stats, &v, copies);
		for (w = 0; w < run->workers; w++)
			worker[w].verdict[v] = copies[w];
	}
	for (p = 0; p < (__u32)run->nports; p++) {
		vz_map_read(redirects, &p, copies);
		for (w = 0; w < run->workers; w++)
			worker[w].redirected[p] = copies[w].packets;
	}
	for (w = 0; w < run->workers; w++) {
		/* torn 64-bit reads cannot happen on x86-64; order is moot */
		worker[w].rt = run->counters[w];
		if (!w) { /* what the dispatcher thread counted */
			const struct vz_worker_counters *d =
				&run->dispatcher_counters;

			worker[w].rt.rx_invalid += d->rx_invalid;
			worker[w].rt.rx += d->rx;
			worker[w].rt.tx_failed += d->tx_failed;
			worker[w].rt.from_kernel += d->from_kernel;
		}
		vz_snapshot_add(s, w, &worker[w]);
	}
	s->rx_missed_known = true;
	s->rx_missed = run->backend->rx_missed(run);
}

static void print_counters(struct vz_us_run *run, const struct vz_snapshot *s,
			   const struct vz_snapshot *prev, double t, double dt,
			   bool summary)
{
	const char *names[VZ_MAX_PORTS];
	struct vz_counter_view view = {
		.nf = run->nf.name,
		.ports = names,
		.nports = run->nports,
		.json = run->json,
		.runtime = true,
		.ctl_refused = &run->ctl.refused,
		.ctl = &run->ctl,
	};
	int p;

	for (p = 0; p < run->nports; p++)
		names[p] = run->ports[p].ifname;
	vz_counters_print(&view, s, prev, t, dt, summary);
}

static struct vz_us_port *vanished_port(struct vz_us_run *run)
{
	char name[IF_NAMESIZE];
	int i;

	for (i = 0; i < run->nports; i++)
		if (run->ports[i].ifindex &&
		    (!if_indextoname((unsigned int)run->ports[i].ifindex,
				     name) ||
		     strcmp(name, run->ports[i].ifname)))
			return &run->ports[i];
	return NULL;
}

static int count_loop(struct vz_us_run *run)
{
	static struct vz_snapshot first, prev, cur;
	double start = vz_now_s(), last = start, next = start, t;
	struct vz_us_port *gone = NULL;

	take_snapshot(run, &first);
	prev = first;
	while (!run->stop) {
		next += run->interval;
		if (run->duration > 0 && next > start + run->duration)
			next = start + run->duration;
		vz_sleep_until(next, &run->stop);
		t = vz_now_s();
		take_snapshot(run, &cur);
		print_counters(run, &cur, &prev, t - start, t - last, false);
		if (run->backend->report)
			run->backend->report(run, t - start, false);
		prev = cur;
		last = t;
		gone = vanished_port(run);
		if (gone)
			break;
		if (run->duration > 0 && t - start >= run->duration - 1e-6)
			break;
	}
	run->stop = 1;
	run->backend->join(run);
	t = vz_now_s();
	take_snapshot(run, &cur);
	print_counters(run, &cur, &first, t - start, t - start, true);
	if (run->backend->report)
		run->backend->report(run, t - start, true);
	if (!gone)
		return 0;
	vz_err("%s disappeared while running; stopped", gone->ifname);
	return -ENODEV;
}

static void print_attached(struct vz_us_run *run)
{
	char what[256] = "";
	int i;

	run->backend->describe(run, what, sizeof(what));
	if (run->json) {
		printf("{\"event\": \"attached\", \"nf\": \"%s\", \"mode\": "
		       "\"%s\", \"workers\": %u, \"queues\": %u, \"ports\": [",
		       run->nf.name, run->backend->name, run->workers,
		       run->queues);
		for (i = 0; i < run->nports; i++)
			printf("%s\"%s\"", i ? ", " : "", run->ports[i].ifname);
		printf("], \"pass\": [");
		for (i = 0; i < run->nports; i++)
			printf("%s\"%s\"", i ? ", " : "",
			       run->ports[i].tap.name);
		printf("], \"detail\": \"%s\", \"ctl\": \"%s\"}\n", what,
		       run->ctl.path);
	} else {
		printf("%s on %s:", run->nf.name, what);
		for (i = 0; i < run->nports; i++)
			printf(" %s (port %d, PASS via %s)",
			       run->ports[i].ifname, i, run->ports[i].tap.name);
		printf("; Ctrl-C to stop\n");
	}
	fflush(stdout);
}

/* ---- main ------------------------------------------------------------------
 */

static int open_taps(struct vz_us_run *run)
{
	struct vz_map *present = vz_native_map(&run->nf.native, "vz_ports");
	char err[256];
	__u32 p, one = 1;
	int ret;

	for (p = 0; p < (__u32)run->nports; p++) {
		struct vz_us_port *port = &run->ports[p];

		ret = vz_tap_open(&port->tap, port->ifname, port->mac,
				  port->mtu, err, sizeof(err));
		if (ret) {
			vz_err("%s", err);
			return ret;
		}
		/* A redirect to this port number is now a real one. */
		vz_map_update_elem(present, &p, &one, 0);
	}
	return 0;
}

int vz_us_main(int argc, char **argv, const struct vz_backend *backend)
{
	struct vz_us_run *run = calloc(1, sizeof(*run));
	struct sigaction sa = { .sa_handler = on_signal };
	const char *bpf_path = NULL, *native_path = NULL;
	char *sets[VZ_MAX_SETS], ctl_err[512];
	int i, nsets = 0, ret;
	bool started = false;

	if (!run)
		return 1;
	run->backend = backend;
	run->workers = 1;
	run->batch = 64;
	run->interval = 1.0;
	run->steer_mode = XDP_MODE_NATIVE;
	run->pmd = "af_xdp";
	run->dispatch = -1;
	run->ctl_gid = VZ_ROOT_ONLY;
	for (i = 0; i < VZ_MAX_PORTS; i++) {
		run->ports[i].lock.fd = -1;
		run->ports[i].tap.fd = -1;
	}
	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	ret = parse_args(run, argc, argv, &bpf_path, &native_path, sets,
			 &nsets);
	if (ret)
		goto out_free;
	ret = check_ifaces(run);
	if (ret)
		goto out_free;
	if (!vz_xdp_privileged()) {
		vz_err("the %s backend needs root (CAP_NET_ADMIN, CAP_BPF and "
		       "CAP_NET_RAW)",
		       backend->name);
		ret = 1;
		goto out_free;
	}
	if (vz_nf_open(&run->nf, bpf_path, native_path, sets, nsets,
		       run->workers)) {
		ret = 2;
		goto out_free;
	}
	if (vz_check_port_fields(&run->nf, run->nports, run->ports[0].ifname)) {
		ret = 2;
		goto out_nf;
	}
	vz_ctl_init_native(&run->ctl, &run->nf.native, backend->name);
	for (i = 0; i < run->nports; i++)
		vz_ctl_add_port(&run->ctl, run->ports[i].ifname);
	/* The NF's state (routes, rules, VIPs) is in its maps before it runs.
	 */
	if (run->ops_path && vz_ctl_apply_file(&run->ctl, run->ops_path,
					       ctl_err, sizeof(ctl_err))) {
		vz_err("%s", ctl_err);
		ret = 2;
		goto out_nf;
	}

	ret = 1;
	/* Signals from here on, so an interrupted start still cleans up. */
	signalled_run = run;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	{
		char err[256];

		if (vz_bpffs_ensure(err, sizeof(err))) {
			vz_err("%s", err);
			goto out;
		}
	}
	for (i = 0; i < run->nports; i++)
		if (run->ports[i].ifindex &&
		    vz_claim_port(&run->ports[i].lock, run->ports[i].ifindex,
				  run->ports[i].ifname, run->replace))
			goto out;
	/* TAPs after the ports: a DPDK-only port's MAC is known only then */
	if (backend->setup(run) || run->stop || open_taps(run))
		goto out;
	if (backend->start(run))
		goto out;
	started = true;
	if (vz_ctl_listen(&run->ctl, run->ctl_gid, ctl_err, sizeof(ctl_err))) {
		vz_err("%s", ctl_err);
		goto out;
	}
	print_attached(run);
	ret = count_loop(run) ? 1 : 0;
out:
	vz_ctl_close(&run->ctl);
	run->stop = 1;
	if (!started)
		backend->join(run);
	backend->teardown(run);
	for (i = 0; i < run->nports; i++) {
		vz_tap_close(&run->ports[i].tap);
		vz_iface_unlock(&run->ports[i].lock);
	}
out_nf:
	vz_nf_close(&run->nf);
out_free:
	signalled_run = NULL;
	free(run);
	return ret;
}
