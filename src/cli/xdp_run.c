// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-xdp run: an NF on live interfaces at the XDP hook (native or generic),
 * loaded and attached through libxdp, with per-interval counters read from
 * the NF's own per-CPU maps. Detaches on SIGINT, SIGTERM, SIGHUP or after
 * --duration (and when stdout goes away); refuses, or with --replace removes, a
 * program a killed run left behind.
 *
 * With --dispatch POLICY --workers N the interfaces run the dispatcher
 * (src/dispatch/xdp_stage.h) and the NF's cpumap build runs on CPUs 0..N-1
 * behind it, its maps the ones the counters and the control socket use. With
 * --alloc the core allocator sets the active CPUs from their cpumap queues'
 * delay (src/dispatch/xdp_alloc.h), checked every millisecond; without it,
 * SIGUSR1 takes the highest active CPU out of the active set, SIGUSR2 puts
 * the next one back (applied at the next interval).
 */
#include <errno.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "cli/common.h"
#include "cli/counters.h"
#include "cli/ports.h"
#include "common/run_options.h"
#include "runtime/clock.h"
#include "runtime/ctl.h"
#include "runtime/peercred.h"
#include "xdp/attach.h"
#include "dispatch/policy.h"
#include "dispatch/xdp_alloc.h"
#include "dispatch/xdp_stage.h"

struct port {
	const char *ifname;
	int ifindex;
	bool attached;
	struct vz_iface_lock lock;
};

struct runner {
	struct vz_nf nf;
	struct xdp_program *prog;
	struct vz_ctl ctl;
	const char *ops_path;
	enum xdp_attach_mode mode;
	struct port ports[VZ_MAX_PORTS];
	int nports;
	bool json;
	bool replace;
	gid_t ctl_gid; /* --ctl-group, or VZ_ROOT_ONLY */
	double interval;
	double duration; /* 0: until stopped */
	int ncpus;
	struct vz_stat *percpu;
	int stats_fd;
	int redirects_fd;
	int policy; /* --dispatch, or -1 */
	unsigned int workers; /* --workers: CPUs behind the dispatcher */
	bool workers_given;
	struct vz_xdp_dispatch *dsp;
	struct vz_xdp_dispatch_stats dsp_stats;
	bool alloc; /* --alloc */
	struct vz_xdp_alloc xa;
};

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t active_delta; /* SIGUSR2 +1, SIGUSR1 -1 */

/* bpf_ktime_get_ns()'s clock, as the allocator counts time */
static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void on_active_signal(int sig)
{
	active_delta += sig == SIGUSR2 ? 1 : -1;
}

/*
 * Per-CPU counters, one worker per CPU: a BPF per-CPU map lookup returns
 * every CPU's copy at once.
 */
static void read_percpu(struct runner *r, int fd, __u32 key,
			struct vz_stat *out)
{
	if (bpf_map_lookup_elem(fd, &key, out))
		memset(out, 0, sizeof(*out) * (size_t)r->ncpus);
}

static void take_snapshot(struct runner *r, struct vz_snapshot *s)
{
	static struct vz_counts cpu[VZ_MAX_WORKERS];
	unsigned int ncpus = (unsigned int)r->ncpus, c;
	__u32 v, p;

	if (ncpus > VZ_MAX_WORKERS) /* fold the rest into the last one */
		ncpus = VZ_MAX_WORKERS;
	memset(s, 0, sizeof(*s));
	memset(cpu, 0, sizeof(cpu));
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		read_percpu(r, r->stats_fd, v, r->percpu);
		for (c = 0; c < (unsigned int)r->ncpus; c++) {
			unsigned int w = c < ncpus ? c : ncpus - 1;

			cpu[w].verdict[v].packets += r->percpu[c].packets;
			cpu[w].verdict[v].bytes += r->percpu[c].bytes;
		}
	}
	for (p = 0; p < (__u32)r->nports; p++) {
		read_percpu(r, r->redirects_fd, p, r->percpu);
		for (c = 0; c < (unsigned int)r->ncpus; c++)
			cpu[c < ncpus ? c : ncpus - 1].redirected[p] +=
				r->percpu[c].packets;
	}
	for (c = 0; c < ncpus; c++)
		vz_snapshot_add(s, c, &cpu[c]);
}

/*
 * The dispatch stage's part of a counters line: frames sent to each CPU,
 * the active CPUs, flows and buckets moved (all counts since the start).
 */
static void print_dispatch(const void *arg, FILE *f, bool json)
{
	const struct runner *r = arg;
	const struct vz_xdp_dispatch_stats *d = &r->dsp_stats;
	const struct vz_core_alloc_stats *as = &r->xa.core.stats;
	unsigned int i;

	if (!json) {
		fprintf(f, "  cpus");
		for (i = 0; i < d->workers; i++)
			fprintf(f, " %u:%llu", i,
				(unsigned long long)d->cpu_packets[i]);
		fprintf(f, "  active %u/%u  moved %llu", d->nactive, d->workers,
			(unsigned long long)(d->policy == VZ_DSP_BUCKETS_POLICY
						     ? d->counter
							       [VZ_DSP_BUCKETS_MOVED]
						     : d->counter
							       [VZ_DSP_FLOWS_MOVED]));
		if (r->alloc)
			fprintf(f, "  reallocations %llu",
				(unsigned long long)(as->grows + as->shrinks));
		return;
	}
	fprintf(f,
		", \"dispatch\": {\"policy\": \"%s\", \"workers\": %u, "
		"\"active\": [",
		vz_xdp_dispatch_policy_name(d->policy), d->workers);
	for (i = 0; i < d->nactive; i++)
		fprintf(f, "%s%u", i ? ", " : "", d->active[i]);
	fprintf(f, "], \"cpu_packets\": [");
	for (i = 0; i < d->workers; i++)
		fprintf(f, "%s%llu", i ? ", " : "",
			(unsigned long long)d->cpu_packets[i]);
	fprintf(f,
		"], \"flows_new\": %llu, \"flows_moved\": %llu, "
		"\"flows_aged\": %llu, \"flows\": %llu, "
		"\"buckets_moved\": %llu, \"bucket_moves_requested\": %llu, "
		"\"rebalances\": %llu, \"no_cpu\": %llu",
		(unsigned long long)d->counter[VZ_DSP_FLOWS_NEW],
		(unsigned long long)d->counter[VZ_DSP_FLOWS_MOVED],
		(unsigned long long)d->counter[VZ_DSP_FLOWS_AGED],
		(unsigned long long)d->flows,
		(unsigned long long)d->counter[VZ_DSP_BUCKETS_MOVED],
		(unsigned long long)d->buckets_requested,
		(unsigned long long)d->rebalances,
		(unsigned long long)d->counter[VZ_DSP_NO_CPU]);
	if (r->alloc)
		fprintf(f,
			", \"alloc\": {\"mean_active\": %.3f, "
			"\"reallocations\": %llu, \"grows\": %llu, "
			"\"shrinks\": %llu, \"written_off\": %llu}",
			vz_xdp_alloc_mean_active(&r->xa),
			(unsigned long long)(as->grows + as->shrinks),
			(unsigned long long)as->grows,
			(unsigned long long)as->shrinks,
			(unsigned long long)vz_xdp_alloc_written_off(&r->xa));
	fprintf(f, "}");
}

static void print_stats(struct runner *r, const struct vz_snapshot *s,
			const struct vz_snapshot *prev, double t, double dt,
			bool summary)
{
	const char *names[VZ_MAX_PORTS];
	struct vz_counter_view view = {
		.nf = r->nf.name,
		.ports = names,
		.nports = r->nports,
		.json = r->json,
		.ctl_refused = &r->ctl.refused,
		.ctl = &r->ctl,
	};
	int p;

	if (r->dsp) {
		vz_xdp_dispatch_read(r->dsp, &r->dsp_stats);
		view.extra = print_dispatch;
		view.extra_arg = r;
	}

	for (p = 0; p < r->nports; p++)
		names[p] = r->ports[p].ifname;
	vz_counters_print(&view, s, prev, t, dt, summary);
}

static int explain_attach_error(struct runner *r, struct port *port, int err)
{
	char msg[256];

	if (err == -EOPNOTSUPP && r->mode == XDP_MODE_NATIVE)
		vz_err("%s has no native XDP support; use --backend "
		       "xdp-generic",
		       port->ifname);
	else if (err == -EEXIST || err == -EBUSY)
		vz_err("%s: another XDP program was attached meanwhile",
		       port->ifname);
	else {
		libxdp_strerror(err, msg, sizeof(msg));
		vz_err("cannot attach %s to %s in %s mode: %s", r->nf.name,
		       port->ifname, vz_xdp_mode_name(r->mode), msg);
	}
	return err;
}

/* Port numbers <-> interfaces, for VZ_REDIRECT and vz_ingress_port(). */
static int fill_port_maps(struct runner *r)
{
	int ports_fd = bpf_map__fd(
		bpf_object__find_map_by_name(r->nf.obj, "vz_ports"));
	int ifports_fd = bpf_map__fd(
		bpf_object__find_map_by_name(r->nf.obj, "vz_ifports"));
	__u32 p, ifindex;

	for (p = 0; p < (__u32)r->nports; p++) {
		ifindex = (__u32)r->ports[p].ifindex;
		if (bpf_map_update_elem(ports_fd, &p, &ifindex, 0) ||
		    bpf_map_update_elem(ifports_fd, &ifindex, &p, 0)) {
			vz_err("cannot set up port %u (%s): %s", p,
			       r->ports[p].ifname, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int attach_all(struct runner *r)
{
	struct port *port;
	int i, err;

	if (r->policy >= 0) {
		char err[512];

		/* the NF into the cpumap, the dispatcher onto the ports */
		r->dsp = vz_xdp_dispatch_open(r->policy, r->workers, r->nf.obj,
					      err, sizeof(err));
		if (!r->dsp) {
			vz_err("%s", err);
			return -EINVAL;
		}
		/* The allocator starts from one CPU and grows with the load. */
		if (r->alloc &&
		    (vz_xdp_dispatch_set_active(r->dsp, 1) ||
		     vz_xdp_alloc_init(&r->xa, r->workers, 1, mono_ns())))
			return -EINVAL;
	}
	r->prog = xdp_program__from_bpf_obj(
		r->dsp ? vz_xdp_dispatch_object(r->dsp) : r->nf.obj, NULL);
	err = (int)libxdp_get_error(r->prog);
	if (err) {
		r->prog = NULL;
		vz_err("libxdp cannot use %s: %s",
		       r->dsp ? "the dispatcher" : r->nf.name, strerror(-err));
		return err;
	}
	for (i = 0; i < r->nports; i++) {
		port = &r->ports[i];
		err = xdp_program__attach(r->prog, port->ifindex, r->mode, 0);
		if (err)
			return explain_attach_error(r, port, err);
		port->attached = true;
	}
	return fill_port_maps(r);
}

static void detach_all(struct runner *r)
{
	struct port *port;
	int i, err;

	for (i = 0; i < r->nports; i++) {
		port = &r->ports[i];
		if (port->attached) {
			err = xdp_program__detach(r->prog, port->ifindex,
						  r->mode, 0);
			if (err)
				err = vz_xdp_detach_all(port->ifindex);
			if (err)
				vz_err("could not detach from %s: %s",
				       port->ifname, strerror(-err));
			port->attached = false;
		}
		vz_iface_unlock(&port->lock);
	}
}

static unsigned int nf_prog_id(struct runner *r)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_program__fd(vz_nf_program(&r->nf));

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	return info.id;
}

static void print_attached(struct runner *r)
{
	int i;

	if (r->json) {
		printf("{\"event\": \"attached\", \"nf\": \"%s\", \"mode\": "
		       "\"%s\", \"prog_id\": %u, \"ports\": [",
		       r->nf.name, vz_xdp_mode_name(r->mode),
		       xdp_program__id(r->prog));
		for (i = 0; i < r->nports; i++)
			printf("%s\"%s\"", i ? ", " : "", r->ports[i].ifname);
		printf("], \"ctl\": \"%s\"", r->ctl.path);
		/* prog_id is the dispatcher's then; the NF is nf_prog_id */
		if (r->dsp)
			printf(", \"dispatch\": \"%s\", \"workers\": %u, "
			       "\"alloc\": %s, \"nf_prog_id\": %u",
			       vz_xdp_dispatch_policy_name(r->policy),
			       r->workers, r->alloc ? "true" : "false",
			       nf_prog_id(r));
		printf("}\n");
	} else {
		printf("%s attached in %s mode to", r->nf.name,
		       vz_xdp_mode_name(r->mode));
		for (i = 0; i < r->nports; i++)
			printf(" %s (port %d)", r->ports[i].ifname, i);
		if (r->dsp)
			printf(", behind the %s dispatcher on CPUs 0-%u%s",
			       vz_xdp_dispatch_policy_name(r->policy),
			       r->workers - 1,
			       r->alloc ? " (the core allocator picks how many)"
					: "");
		printf("; Ctrl-C to stop\n");
	}
	fflush(stdout);
}

/*
 * A port whose interface went away (deleted, its namespace gone): its
 * program went with it, so there is nothing to detach and nothing to count.
 */
static struct port *vanished_port(struct runner *r)
{
	char name[IF_NAMESIZE];
	int i;

	for (i = 0; i < r->nports; i++) {
		if (!if_indextoname((unsigned int)r->ports[i].ifindex, name) ||
		    strcmp(name, r->ports[i].ifname)) {
			r->ports[i].attached = false;
			return &r->ports[i];
		}
	}
	return NULL;
}

/* The dispatcher's userspace half: the active set, rebalancing. */
static void dispatch_interval(struct runner *r)
{
	int delta = r->alloc ? 0 : active_delta, n; /* --alloc decides */

	active_delta -= delta;
	vz_xdp_dispatch_read(r->dsp, &r->dsp_stats);
	n = (int)r->dsp_stats.nactive + delta;
	if (n < 1)
		n = 1;
	if (n > (int)r->workers)
		n = (int)r->workers;
	if (delta && vz_xdp_dispatch_set_active(r->dsp, (unsigned int)n))
		vz_err("cannot change the active CPUs: %s", strerror(errno));
	vz_xdp_dispatch_tick(r->dsp);
}

/*
 * --alloc: one allocator check. Sent per CPU, from the stage; run per CPU,
 * from the NF's own counters (it runs on the CPU of its cpumap queue).
 */
static void alloc_check(struct runner *r)
{
	__u64 sent[VZ_DSP_MAX_CPUS] = { 0 }, run[VZ_DSP_MAX_CPUS] = { 0 };
	unsigned int before = r->xa.active, after, c;
	__u32 v;

	vz_xdp_dispatch_sent(r->dsp, sent);
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		read_percpu(r, r->stats_fd, v, r->percpu);
		for (c = 0; c < r->workers && c < (unsigned int)r->ncpus; c++)
			run[c] += r->percpu[c].packets;
	}
	after = vz_xdp_alloc_check(&r->xa, mono_ns(), sent, run);
	if (after == before)
		return;
	if (vz_xdp_dispatch_set_active(r->dsp, after))
		vz_err("cannot change the active CPUs: %s", strerror(errno));
	/*
	 * Buckets: a CPU just added gets buckets now, not at the next counters
	 * interval; till then it would sit idle and be parked again.
	 */
	else if (after > before && r->policy == VZ_DSP_BUCKETS_POLICY)
		vz_xdp_dispatch_tick(r->dsp);
}

/* Sleep until `until`; with --alloc, checking every period meanwhile. */
static void wait_until(struct runner *r, double until)
{
	double step = (double)VZ_XDP_ALLOC_PERIOD_NS / 1e9, t;

	if (!r->dsp || !r->alloc) {
		vz_sleep_until(until, &stop_signal);
		return;
	}
	while (!stop_signal && (t = vz_now_s()) < until) {
		vz_sleep_until(t + step < until ? t + step : until,
			       &stop_signal);
		alloc_check(r);
	}
}

/* 0, or -ENODEV when a port vanished (the run stops, counters printed). */
static int count_loop(struct runner *r)
{
	struct port *gone = NULL;
	static struct vz_snapshot first, prev, cur;
	double start = vz_now_s(), last = start, next = start, t;

	take_snapshot(r, &first);
	prev = first;
	while (!stop_signal) {
		next += r->interval;
		if (r->duration > 0 && next > start + r->duration)
			next = start + r->duration;
		wait_until(r, next);
		if (r->dsp)
			dispatch_interval(r);
		t = vz_now_s();
		take_snapshot(r, &cur);
		print_stats(r, &cur, &prev, t - start, t - last, false);
		prev = cur;
		last = t;
		gone = vanished_port(r);
		if (gone)
			break;
		if (r->duration > 0 && t - start >= r->duration - 1e-6)
			break;
	}
	t = vz_now_s();
	take_snapshot(r, &cur);
	print_stats(r, &cur, &first, t - start, t - start, true);
	if (!gone)
		return 0;
	vz_err("%s disappeared while running; stopped", gone->ifname);
	return -ENODEV;
}

static const char xdp_usage[] =
	"usage: vz-xdp run --bpf NF.bpf.o --native NF.so --iface IF "
	"[--iface IF]...\n"
	"                  [--mode native|skb] [--set KEY=VALUE]... "
	"[--json]\n"
	"                  [--interval S] [--duration S] [--replace]\n"
	"                  [--ops FILE] [--dispatch rss-mod|flow-affinity|"
	"buckets --workers N [--alloc]]\n"
	"                  [--ctl-group GROUP]\n";

/* What the command line gives besides struct runner's own fields. */
static struct vz_nf_args cli;

static const char *const mode_names[] = { "native", "skb", NULL };
static const int mode_values[] = { XDP_MODE_NATIVE, XDP_MODE_SKB };

/* --iface, once per port. */
static int opt_iface(const struct vz_option *opt, const char *text, void *dst,
		     void *cfg)
{
	struct runner *r = cfg;

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
	VZ_OPTION(name, type, struct runner, member, __VA_ARGS__)

static struct vz_option xdp_options[] = {
	VZ_NF_OPTIONS(&cli),
	XDP_OPT("iface", VZ_OPT_CUSTOM, ports, .parse = opt_iface,
		.required = true, .repeat = true, .type_name = "ifname",
		.metavar = "IF", .help = "a port (once per port)"),
	XDP_OPT("mode", VZ_OPT_ENUM, mode, .choices = mode_names,
		.values = mode_values, .metavar = "native|skb",
		.help = "XDP attach mode"),
	VZ_RUN_OPTIONS(struct runner),
	XDP_OPT("dispatch", VZ_OPT_ENUM, policy,
		.choices = vz_dispatch_policy_names,
		.nchoices = VZ_DISPATCH_POLICIES, .metavar = "POLICY",
		.help = "a dispatch stage spreads flows over --workers CPUs"),
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

static int parse_args(struct runner *r, int argc, char **argv,
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
	if (r->policy >= 0 && !r->workers_given)
		r->workers = 1;
	return 0;
}

/*
 * NAME.cpumap.bpf.o beside NAME.bpf.o: the NF built to run in a cpumap
 * (include/veloz/nf_cpumap.h). 0, or the exit code after one line.
 */
static int cpumap_build(const char *bpf_path, char *out, size_t len)
{
	size_t n = strlen(bpf_path), suffix = strlen(".bpf.o");

	if (n < suffix || strcmp(bpf_path + n - suffix, ".bpf.o") ||
	    (size_t)snprintf(out, len, "%.*s.cpumap.bpf.o", (int)(n - suffix),
			     bpf_path) >= len) {
		vz_err("%s is not an NAME.bpf.o", bpf_path);
		return 2;
	}
	if (access(out, R_OK)) {
		vz_err("this NF has no cpumap build for --dispatch (%s: %s)",
		       out, strerror(errno));
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *bpf_path = NULL, *native_path = NULL;
	struct runner r = { .mode = XDP_MODE_NATIVE,
			    .interval = 1.0,
			    .policy = -1,
			    .ctl_gid = VZ_ROOT_ONLY };
	struct sigaction sa_active = { .sa_handler = on_active_signal };
	char cpumap_path[4096];
	char ctl_err[512];
	struct sigaction sa = { .sa_handler = on_signal };
	char *sets[VZ_MAX_SETS], err[256];
	int i, j, nsets = 0, ret;

	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	for (i = 0; i < VZ_MAX_PORTS; i++)
		r.ports[i].lock.fd = -1;
	ret = parse_args(&r, argc, argv, &bpf_path, &native_path, sets, &nsets);
	if (ret)
		return ret;

	/* Everything that can be refused is refused before attaching. */
	for (i = 0; i < r.nports; i++) {
		r.ports[i].ifindex = (int)if_nametoindex(r.ports[i].ifname);
		if (!r.ports[i].ifindex) {
			vz_err("no interface '%s' in this network namespace",
			       r.ports[i].ifname);
			return 2;
		}
		for (j = 0; j < i; j++)
			if (r.ports[j].ifindex == r.ports[i].ifindex) {
				vz_err("interface %s given twice",
				       r.ports[i].ifname);
				return 2;
			}
	}
	if (!vz_xdp_privileged()) {
		vz_err("attaching XDP programs needs root (CAP_NET_ADMIN and "
		       "CAP_BPF)");
		return 1;
	}
	if (r.policy >= 0) {
		ret = vz_xdp_dispatch_check(r.workers, err, sizeof(err));
		if (ret) {
			vz_err("%s", err);
			return ret == -EINVAL ? 2 : 1;
		}
		ret = cpumap_build(bpf_path, cpumap_path, sizeof(cpumap_path));
		if (ret)
			return ret;
		bpf_path = cpumap_path;
	}
	if (vz_nf_open(&r.nf, bpf_path, native_path, sets, nsets, 1))
		return 2;
	if (vz_check_port_fields(&r.nf, r.nports, r.ports[0].ifname)) {
		vz_nf_close(&r.nf);
		return 2;
	}
	vz_ctl_init_bpf(&r.ctl, r.nf.obj, r.nf.name,
			r.mode == XDP_MODE_SKB ? "xdp-generic" : "xdp");
	for (i = 0; i < r.nports; i++)
		vz_ctl_add_port(&r.ctl, r.ports[i].ifname);
	/* The NF's state (routes, rules, VIPs) is in its maps before it runs.
	 */
	if (r.ops_path &&
	    vz_ctl_apply_file(&r.ctl, r.ops_path, ctl_err, sizeof(ctl_err))) {
		vz_err("%s", ctl_err);
		vz_nf_close(&r.nf);
		return 2;
	}
	ret = 1;
	if (vz_bpffs_ensure(err, sizeof(err))) {
		vz_err("%s", err);
		goto out;
	}
	/* Signals from here on, so an interrupted start still cleans up. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a closed stdout (| head) stops us cleanly, not killed attached */
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGUSR1, &sa_active, NULL);
	sigaction(SIGUSR2, &sa_active, NULL);
	for (i = 0; i < r.nports; i++)
		if (vz_claim_port(&r.ports[i].lock, r.ports[i].ifindex,
				  r.ports[i].ifname, r.replace))
			goto out;
	if (attach_all(&r))
		goto out;
	r.ncpus = libbpf_num_possible_cpus();
	r.percpu = calloc((size_t)r.ncpus, sizeof(*r.percpu));
	r.stats_fd =
		bpf_map__fd(bpf_object__find_map_by_name(r.nf.obj, "vz_stats"));
	r.redirects_fd = bpf_map__fd(
		bpf_object__find_map_by_name(r.nf.obj, "vz_redirects"));
	if (!r.percpu || r.stats_fd < 0 || r.redirects_fd < 0) {
		vz_err("cannot read the NF's counters");
		goto out;
	}
	if (vz_ctl_listen(&r.ctl, r.ctl_gid, ctl_err, sizeof(ctl_err))) {
		vz_err("%s", ctl_err);
		goto out;
	}
	print_attached(&r);
	ret = count_loop(&r) ? 1 : 0;
out:
	vz_ctl_close(&r.ctl);
	detach_all(&r);
	xdp_program__close(r.prog); /* leaves our bpf_object open */
	vz_xdp_dispatch_close(r.dsp); /* the cpumap goes with the dispatcher */
	vz_nf_close(&r.nf);
	free(r.percpu);
	return ret;
}
