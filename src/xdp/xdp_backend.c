// SPDX-License-Identifier: BSD-2-Clause
/*
 * The xdp backend: attach the NF (or the dispatch stage in front of its
 * cpumap build) to every port through libxdp, count from the NF's per-CPU
 * maps, detach at the end. The runner (src/runner/runner.c) does the rest.
 *
 * With --dispatch POLICY --workers N the NF runs on CPUs 0..N-1 behind the
 * dispatcher, its maps the ones the counters and the control socket use.
 * With --alloc the core allocator sets the active CPUs from their cpumap
 * queues' delay (src/dispatch/xdp_alloc.h), checked every millisecond;
 * without it, SIGUSR1 takes the highest active CPU out of the active set,
 * SIGUSR2 puts the next one back (applied at the next interval).
 */
#include <errno.h>
#include <linux/if_link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common/peercred.h"
#include "common/clock.h"
#include "runner/xdp_attach.h"
#include "xdp/xdp_adopt.h"
#include "xdp/xdp_backend.h"

static volatile sig_atomic_t active_delta; /* SIGUSR2 +1, SIGUSR1 -1 */

static struct vz_xdp_run *xdp_of(const struct vz_us_run *run)
{
	return run->backend_state;
}

static void on_active_signal(int sig)
{
	active_delta += sig == SIGUSR2 ? 1 : -1;
}

/*
 * Per-CPU counters, one worker per CPU: a BPF per-CPU map lookup returns
 * every CPU's copy at once.
 */
static void read_percpu(struct vz_xdp_run *x, int fd, __u32 key,
			struct vz_stat *out)
{
	if (bpf_map_lookup_elem(fd, &key, out))
		memset(out, 0, sizeof(*out) * (size_t)x->ncpus);
}

static void xdp_snapshot(struct vz_us_run *run, struct vz_snapshot *s)
{
	static struct vz_counts cpu[VZ_MAX_WORKERS];
	struct vz_xdp_run *x = xdp_of(run);
	unsigned int ncpus = (unsigned int)x->ncpus, c;
	__u32 v, p;

	if (ncpus > VZ_MAX_WORKERS) /* fold the rest into the last one */
		ncpus = VZ_MAX_WORKERS;
	memset(s, 0, sizeof(*s));
	memset(cpu, 0, sizeof(cpu));
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		read_percpu(x, x->stats_fd, v, x->percpu);
		for (c = 0; c < (unsigned int)x->ncpus; c++) {
			unsigned int w = c < ncpus ? c : ncpus - 1;

			cpu[w].verdict[v].packets += x->percpu[c].packets;
			cpu[w].verdict[v].bytes += x->percpu[c].bytes;
		}
	}
	for (p = 0; p < (__u32)run->nports; p++) {
		read_percpu(x, x->redirects_fd, p, x->percpu);
		for (c = 0; c < (unsigned int)x->ncpus; c++)
			cpu[c < ncpus ? c : ncpus - 1].redirected[p] +=
				x->percpu[c].packets;
	}
	for (c = 0; c < ncpus; c++)
		vz_snapshot_add(s, c, &cpu[c]);
	/* the dispatch stage's part of the line that is printed next */
	if (x->dsp)
		vz_xdp_dispatch_read(x->dsp, &x->dsp_stats);
}

/* The dispatch stage's part of a counters table line. */
static void print_dispatch_table(const struct vz_xdp_run *x, FILE *f)
{
	const struct vz_xdp_dispatch_stats *d = &x->dsp_stats;
	const struct vz_core_alloc_stats *as = &x->xa.core.stats;
	unsigned int i;

	fprintf(f, "  cpus");
	for (i = 0; i < d->workers; i++)
		fprintf(f, " %u:%llu", i,
			(unsigned long long)d->cpu_packets[i]);
	fprintf(f, "  active %u/%u  moved %llu", d->nactive, d->workers,
		(unsigned long long)(d->policy == VZ_DSP_BUCKETS_POLICY
					     ? d->counter[VZ_DSP_BUCKETS_MOVED]
					     : d->counter[VZ_DSP_FLOWS_MOVED]));
	if (x->alloc)
		fprintf(f, "  reallocations %llu",
			(unsigned long long)(as->grows + as->shrinks));
}

/*
 * The dispatch stage's part of a counters line: frames sent to each CPU,
 * the active CPUs, flows and buckets moved (all counts since the start).
 */
static void print_dispatch(const void *arg, FILE *f, bool json)
{
	const struct vz_xdp_run *x = xdp_of(arg);
	const struct vz_xdp_dispatch_stats *d = &x->dsp_stats;
	const struct vz_core_alloc_stats *as = &x->xa.core.stats;
	unsigned int i;

	if (!x->dsp)
		return;
	if (!json) {
		print_dispatch_table(x, f);
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
	if (x->alloc)
		fprintf(f,
			", \"alloc\": {\"mean_active\": %.3f, "
			"\"reallocations\": %llu, \"grows\": %llu, "
			"\"shrinks\": %llu, \"written_off\": %llu}",
			vz_xdp_alloc_mean_active(&x->xa),
			(unsigned long long)(as->grows + as->shrinks),
			(unsigned long long)as->grows,
			(unsigned long long)as->shrinks,
			(unsigned long long)vz_xdp_alloc_written_off(&x->xa));
	fprintf(f, "}");
}

static int explain_attach_error(struct vz_us_run *run,
				const struct vz_us_port *port, int err)
{
	struct vz_xdp_run *x = xdp_of(run);
	char msg[256];

	if (err == -EOPNOTSUPP && x->mode == XDP_MODE_NATIVE)
		vz_err("%s has no native XDP support; use --backend "
		       "xdp-generic",
		       port->ifname);
	else if (err == -EEXIST || err == -EBUSY)
		vz_err("%s: another XDP program was attached meanwhile",
		       port->ifname);
	else {
		libxdp_strerror(err, msg, sizeof(msg));
		vz_err("cannot attach %s to %s in %s mode: %s", run->nf.name,
		       port->ifname, vz_xdp_mode_name(x->mode), msg);
	}
	return err;
}

/* Port numbers <-> interfaces, for VZ_REDIRECT and vz_ingress_port(). */
static int fill_port_maps(struct vz_us_run *run)
{
	int ports_fd = bpf_map__fd(
		bpf_object__find_map_by_name(run->nf.obj, "vz_ports"));
	int ifports_fd = bpf_map__fd(
		bpf_object__find_map_by_name(run->nf.obj, "vz_ifports"));
	__u32 p, ifindex;

	for (p = 0; p < (__u32)run->nports; p++) {
		ifindex = (__u32)run->ports[p].ifindex;
		if (bpf_map_update_elem(ports_fd, &p, &ifindex, 0) ||
		    bpf_map_update_elem(ifports_fd, &ifindex, &p, 0)) {
			vz_err("cannot set up port %u (%s): %s", p,
			       run->ports[p].ifname, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* --dispatch: the NF into the cpumap, the dispatcher onto the ports. */
static int open_dispatch(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	char err[512];

	x->dsp = vz_xdp_dispatch_open(x->policy, x->workers, run->nf.obj, err,
				      sizeof(err));
	if (!x->dsp) {
		vz_err("%s", err);
		return -EINVAL;
	}
	/* The allocator starts from one CPU and grows with the load. */
	if (x->alloc && (vz_xdp_dispatch_set_active(x->dsp, 1) ||
			 vz_xdp_alloc_init(&x->xa, x->workers, 1, vz_now_ns())))
		return -EINVAL;
	return 0;
}

/* The id of the program now on PORT's hook (0: none, or unknown). */
static __u32 hook_id(const struct vz_us_port *port)
{
	struct vz_xdp_attached now;

	return vz_xdp_query(port->ifindex, &now) ? 0 : now.prog_id;
}

/*
 * --persist, or adopting: the NF alone on the hook, without libxdp's
 * dispatcher, whose pins a successor in another bpffs could not find; an
 * adopted program is swapped out in the same step.
 */
static int attach_direct(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	struct bpf_program *prog = vz_nf_program(&run->nf);
	__u32 flag = x->mode == XDP_MODE_SKB ? XDP_FLAGS_SKB_MODE
					     : XDP_FLAGS_DRV_MODE;
	int i, err;

	x->direct = true;
	bpf_program__set_type(prog, BPF_PROG_TYPE_XDP);
	err = bpf_object__load(run->nf.obj);
	if (err) {
		vz_err("the kernel refused %s: %s", run->nf.name,
		       strerror(-err));
		return err;
	}
	x->prog_fd = bpf_program__fd(prog);
	if (run->adopted) {
		err = vz_xdp_adopt_swap(run, x->prog_fd);
		if (err)
			return err;
	} else {
		for (i = 0; i < run->nports; i++) {
			err = bpf_xdp_attach(run->ports[i].ifindex, x->prog_fd,
					     flag | XDP_FLAGS_UPDATE_IF_NOEXIST,
					     NULL);
			if (err)
				return explain_attach_error(run, &run->ports[i],
							    err);
			x->attached[i] = true;
		}
	}
	for (i = 0; i < run->nports; i++)
		x->attached_id[i] = hook_id(&run->ports[i]);
	return run->adopted ? vz_xdp_adopt_finish(run) : 0;
}

static int attach_all(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i, err;

	if (x->since <= 0)
		x->since = (double)time(NULL);
	if (x->persist || run->adopted) {
		err = attach_direct(run);
		return err ? err : fill_port_maps(run);
	}
	if (x->policy >= 0 && open_dispatch(run))
		return -EINVAL;
	x->prog = xdp_program__from_bpf_obj(
		x->dsp ? vz_xdp_dispatch_object(x->dsp) : run->nf.obj, NULL);
	err = (int)libxdp_get_error(x->prog);
	if (err) {
		x->prog = NULL;
		vz_err("libxdp cannot use %s: %s",
		       x->dsp ? "the dispatcher" : run->nf.name,
		       strerror(-err));
		return err;
	}
	for (i = 0; i < run->nports; i++) {
		err = xdp_program__attach(x->prog, run->ports[i].ifindex,
					  x->mode, 0);
		if (err)
			return explain_attach_error(run, &run->ports[i], err);
		x->attached[i] = true;
		x->attached_id[i] = hook_id(&run->ports[i]);
	}
	return fill_port_maps(run);
}

static int xdp_setup(struct vz_us_run *run)
{
	struct sigaction sa_active = { .sa_handler = on_active_signal };
	struct vz_xdp_run *x = xdp_of(run);

	sigaction(SIGUSR1, &sa_active, NULL);
	sigaction(SIGUSR2, &sa_active, NULL);
	if (attach_all(run))
		return -1;
	x->ncpus = libbpf_num_possible_cpus();
	x->percpu = calloc((size_t)x->ncpus, sizeof(*x->percpu));
	x->stats_fd = bpf_map__fd(
		bpf_object__find_map_by_name(run->nf.obj, "vz_stats"));
	x->redirects_fd = bpf_map__fd(
		bpf_object__find_map_by_name(run->nf.obj, "vz_redirects"));
	if (!x->percpu || x->stats_fd < 0 || x->redirects_fd < 0) {
		vz_err("cannot read the NF's counters");
		return -1;
	}
	return 0;
}

/* The NF runs in the kernel: no workers of ours to start or wait for. */
static int xdp_start(struct vz_us_run *run)
{
	(void)run;
	return 0;
}

static void xdp_join(struct vz_us_run *run)
{
	(void)run;
}

/*
 * Detach from one port, unless a successor's program replaced ours there
 * (--take-over, or a run that adopted it): that one is not ours to remove.
 */
static void detach_port(struct vz_us_run *run, int i)
{
	struct vz_xdp_run *x = xdp_of(run);
	__u32 flag = x->mode == XDP_MODE_SKB ? XDP_FLAGS_SKB_MODE
					     : XDP_FLAGS_DRV_MODE;
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = x->prog_fd);
	int err;

	if (x->attached_id[i] && hook_id(&run->ports[i]) != x->attached_id[i])
		return;
	if (x->direct) /* only if it is still ours, in one step */
		err = bpf_xdp_attach(run->ports[i].ifindex, -1,
				     flag | XDP_FLAGS_REPLACE, &opts);
	else
		err = xdp_program__detach(x->prog, run->ports[i].ifindex,
					  x->mode, 0);
	if (err && !x->direct)
		err = vz_xdp_detach_all(run->ports[i].ifindex);
	if (err && err != -EEXIST)
		vz_err("could not detach from %s: %s", run->ports[i].ifname,
		       strerror(-err));
}

/* What stays when the NF stays attached: a line saying so. */
static void say_left(struct vz_us_run *run)
{
	if (run->ctl.leave)
		fprintf(stderr,
			"veloz: %s on %s handed over to its successor\n",
			run->nf.name, run->ports[0].ifname);
	else
		fprintf(stderr,
			"veloz: %s left attached to %s%s (--persist): the "
			"next veloz run of %s there adopts it\n",
			run->nf.name, run->ports[0].ifname,
			run->nports > 1 ? " and the other ports" : "",
			run->nf.name);
}

static void xdp_teardown(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	bool stay = run->ctl.leave || x->persist, any = false;
	int i;

	for (i = 0; i < run->nports; i++) {
		/* a vanished interface took its program with it */
		if (!x->attached[i] || run->ports[i].gone)
			continue;
		any = true;
		if (!stay)
			detach_port(run, i);
		x->attached[i] = false;
	}
	if (any && stay)
		say_left(run);
	else if (!stay)
		vz_xdp_record_remove(run);
	vz_xdp_adopt_close(run);
	xdp_program__close(x->prog); /* leaves our bpf_object open */
	x->prog = NULL;
	vz_xdp_dispatch_close(x->dsp); /* the cpumap goes with the dispatcher */
	x->dsp = NULL;
	free(x->percpu);
	x->percpu = NULL;
}

static unsigned int nf_prog_id(struct vz_us_run *run)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_program__fd(vz_nf_program(&run->nf));

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	return info.id;
}

static void print_attached_json(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i;

	printf("{\"event\": \"attached\", \"nf\": \"%s\", \"mode\": "
	       "\"%s\", \"prog_id\": %u, \"adopted\": %s, \"persist\": %s, "
	       "\"ports\": [",
	       run->nf.name, vz_xdp_mode_name(x->mode), x->attached_id[0],
	       run->adopted ? "true" : "false", x->persist ? "true" : "false");
	for (i = 0; i < run->nports; i++)
		printf("%s\"%s\"", i ? ", " : "", run->ports[i].ifname);
	printf("], \"ctl\": \"%s\"", run->ctl.path);
	/* prog_id is the dispatcher's then; the NF is nf_prog_id */
	if (x->dsp)
		printf(", \"dispatch\": \"%s\", \"workers\": %u, "
		       "\"alloc\": %s, \"nf_prog_id\": %u",
		       vz_xdp_dispatch_policy_name(x->policy), x->workers,
		       x->alloc ? "true" : "false", nf_prog_id(run));
	printf("}\n");
}

/* Attached and listening: what a successor needs, then the line. */
static void xdp_attached(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i;

	vz_xdp_record_write(run);
	if (run->json) {
		print_attached_json(run);
		return;
	}
	printf("%s %s in %s mode to", run->nf.name,
	       run->adopted ? "adopted" : "attached",
	       vz_xdp_mode_name(x->mode));
	for (i = 0; i < run->nports; i++)
		printf(" %s (port %d)", run->ports[i].ifname, i);
	if (x->dsp)
		printf(", behind the %s dispatcher on CPUs 0-%u%s",
		       vz_xdp_dispatch_policy_name(x->policy), x->workers - 1,
		       x->alloc ? " (the core allocator picks how many)" : "");
	printf("; Ctrl-C to stop\n");
}

/* The dispatcher's userspace half, each interval: active set, rebalancing. */
static void xdp_tick(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int delta, n;

	if (!x->dsp)
		return;
	delta = x->alloc ? 0 : active_delta; /* --alloc decides */
	active_delta -= delta;
	vz_xdp_dispatch_read(x->dsp, &x->dsp_stats);
	n = (int)x->dsp_stats.nactive + delta;
	if (n < 1)
		n = 1;
	if (n > (int)x->workers)
		n = (int)x->workers;
	if (delta && vz_xdp_dispatch_set_active(x->dsp, (unsigned int)n))
		vz_err("cannot change the active CPUs: %s", strerror(errno));
	vz_xdp_dispatch_tick(x->dsp);
}

/*
 * --alloc: one allocator check. Sent per CPU, from the stage; run per CPU,
 * from the NF's own counters (it runs on the CPU of its cpumap queue).
 */
static void alloc_check(struct vz_xdp_run *x)
{
	__u64 sent[VZ_DSP_MAX_CPUS] = { 0 }, ran[VZ_DSP_MAX_CPUS] = { 0 };
	unsigned int before = x->xa.active, after, c;
	__u32 v;

	vz_xdp_dispatch_sent(x->dsp, sent);
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		read_percpu(x, x->stats_fd, v, x->percpu);
		for (c = 0; c < x->workers && c < (unsigned int)x->ncpus; c++)
			ran[c] += x->percpu[c].packets;
	}
	after = vz_xdp_alloc_check(&x->xa, vz_now_ns(), sent, ran);
	if (after == before)
		return;
	if (vz_xdp_dispatch_set_active(x->dsp, after))
		vz_err("cannot change the active CPUs: %s", strerror(errno));
	/*
	 * Buckets: a CPU just added gets buckets now, not at the next counters
	 * interval; till then it would sit idle and be parked again.
	 */
	else if (after > before && x->policy == VZ_DSP_BUCKETS_POLICY)
		vz_xdp_dispatch_tick(x->dsp);
}

/* Sleep until `until`; with --alloc, checking every period meanwhile. */
static void xdp_wait(struct vz_us_run *run, double until)
{
	double step = (double)VZ_XDP_ALLOC_PERIOD_NS / 1e9, t;
	struct vz_xdp_run *x = xdp_of(run);

	if (!x->dsp || !x->alloc) {
		vz_sleep_until(until, &run->stop);
		return;
	}
	while (!run->stop && (t = vz_now_s()) < until) {
		vz_sleep_until(t + step < until ? t + step : until, &run->stop);
		alloc_check(x);
	}
}

/*
 * --dispatch: can this kernel, and NAME.cpumap.bpf.o beside NAME.bpf.o (the
 * NF built to run in a cpumap, include/veloz/nf_cpumap.h), do it? Then that
 * build is the one opened. 0, or the exit code after one line.
 */
static int xdp_prepare(struct vz_us_run *run, const char **bpf_path)
{
	struct vz_xdp_run *x = xdp_of(run);
	size_t n = strlen(*bpf_path), suffix = strlen(".bpf.o");
	char err[256];
	int ret;

	if (x->policy < 0)
		return 0;
	ret = vz_xdp_dispatch_check(x->workers, err, sizeof(err));
	if (ret) {
		vz_err("%s", err);
		return ret == -EINVAL ? 2 : 1;
	}
	if (n < suffix || strcmp(*bpf_path + n - suffix, ".bpf.o") ||
	    (size_t)snprintf(x->cpumap_path, sizeof(x->cpumap_path),
			     "%.*s.cpumap.bpf.o", (int)(n - suffix),
			     *bpf_path) >= sizeof(x->cpumap_path)) {
		vz_err("%s is not an NAME.bpf.o", *bpf_path);
		return 2;
	}
	if (access(x->cpumap_path, R_OK)) {
		vz_err("this NF has no cpumap build for --dispatch (%s: %s)",
		       x->cpumap_path, strerror(errno));
		return 2;
	}
	*bpf_path = x->cpumap_path;
	return 0;
}

#define XDP_BACKEND(NAME)                                                      \
	{                                                                      \
		.name = NAME, .setup = xdp_setup, .start = xdp_start,          \
		.join = xdp_join, .teardown = xdp_teardown, .in_kernel = true, \
		.prepare = xdp_prepare, .snapshot = xdp_snapshot,              \
		.wait = xdp_wait, .tick = xdp_tick, .extra = print_dispatch,   \
		.attached = xdp_attached, .adopt = vz_xdp_adopt,               \
	}

/* One backend per mode: the name is the one the control socket reports. */
static const struct vz_backend xdp_backend = XDP_BACKEND("xdp");
static const struct vz_backend xdp_generic_backend = XDP_BACKEND("xdp-generic");

void vz_xdp_run_defaults(struct vz_xdp_run *x)
{
	memset(x, 0, sizeof(*x));
	x->mode = XDP_MODE_NATIVE;
	x->interval = 1.0;
	x->policy = -1;
	x->ctl_gid = VZ_ROOT_ONLY;
	x->ctl_idle = VZ_CTL_IDLE_MS_DEFAULT / 1e3;
	x->prog_fd = -1;
	for (int i = 0; i < VZ_MAX_PORTS; i++)
		x->old_fd[i] = -1;
}

int vz_xdp_run(struct vz_xdp_run *x, const char *bpf_path,
	       const char *native_path, char **sets, int nsets)
{
	static struct vz_us_run run;
	int i;

	vz_run_init(&run, x->mode == XDP_MODE_SKB ? &xdp_generic_backend
						  : &xdp_backend);
	run.backend_state = x;
	for (i = 0; i < x->nports; i++)
		run.ports[i].ifname = x->ports[i].ifname;
	run.nports = x->nports;
	run.ops_path = x->ops_path;
	run.json = x->json;
	run.replace = x->replace;
	run.ctl_gid = x->ctl_gid;
	run.ctl_idle = x->ctl_idle;
	run.interval = x->interval;
	run.duration = x->duration;
	run.dispatch = x->policy;
	run.alloc = x->alloc;
	x->config_hash = vz_xdp_config_hash(sets, nsets);
	return vz_run(&run, bpf_path, native_path, sets, nsets);
}
