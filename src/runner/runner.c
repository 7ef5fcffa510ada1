// SPDX-License-Identifier: BSD-2-Clause
/*
 * `run`, on every backend: the one runner. Refuses bad input before
 * touching an interface; claims each interface (lock, stale program check);
 * opens the NF (natively with one copy of its per-CPU maps per worker on
 * the userspace backends) and its control socket; gives each userspace
 * port a TAP for PASS; lets the backend attach or open its ports and start
 * its workers; prints counters; stops on SIGINT, SIGTERM, SIGHUP, SIGPIPE,
 * --duration or a vanished interface, and undoes everything in reverse
 * order. What differs per backend is in struct vz_backend (userspace.h).
 *
 * Under a service (`veloz run --instance`), SIGHUP is a reload instead: the
 * companion that reloads the config (python/veloz/control/service.py) is
 * named in $VELOZ_RELOAD_PID, and SIGHUP is passed on to it, so that
 * `kill -HUP MAINPID` reloads as `systemctl reload` does.
 */
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/iface.h"
#include "common/peercred.h"
#include "common/clock.h"
#include "runner/counters.h"
#include "runner/ports.h"
#include "runner/userspace.h"
#include "runner/xdp_attach.h"

static struct vz_us_run *signalled_run;
static pid_t reload_pid; /* 0: SIGHUP stops the run */

static void on_signal(int sig)
{
	int saved = errno;

	if (sig == SIGHUP && reload_pid > 0)
		kill(reload_pid, SIGHUP);
	else if (signalled_run)
		signalled_run->stop = 1;
	errno = saved;
}

void vz_us_worker_enter(unsigned int worker)
{
	vz_worker_id = worker;
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
		if (run->backend->in_kernel)
			continue; /* no MAC, MTU or queues of ours to check */
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

static void native_snapshot(struct vz_us_run *run, struct vz_snapshot *s)
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

/* Counters now: the backend's own (xdp: per-CPU BPF maps) or the native maps.
 */
static void take_snapshot(struct vz_us_run *run, struct vz_snapshot *s)
{
	if (run->backend->snapshot)
		run->backend->snapshot(run, s);
	else
		native_snapshot(run, s);
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
		.runtime = !run->backend->in_kernel,
		.ctl_refused = &run->ctl.refused,
		.ctl_idle_closed = &run->ctl.idle_closed,
		.ctl = &run->ctl,
		.extra = run->backend->extra,
		.extra_arg = run,
	};
	int p;

	for (p = 0; p < run->nports; p++)
		names[p] = run->ports[p].ifname;
	vz_counters_print(&view, s, prev, t, dt, summary);
}

/* Counters now, one line since `prev`, and the backend's own report. */
static void count_once(struct vz_us_run *run, struct vz_snapshot *cur,
		       const struct vz_snapshot *prev, double t, double dt,
		       bool summary)
{
	take_snapshot(run, cur);
	print_counters(run, cur, prev, t, dt, summary);
	if (run->backend->report)
		run->backend->report(run, t, summary);
}

/*
 * A port whose interface went away (deleted, its namespace gone): marked
 * gone, as an XDP program went with it and there is nothing to detach.
 */
static struct vz_us_port *vanished_port(struct vz_us_run *run)
{
	char name[IF_NAMESIZE];
	int i;

	for (i = 0; i < run->nports; i++)
		if (run->ports[i].ifindex &&
		    (!if_indextoname((unsigned int)run->ports[i].ifindex,
				     name) ||
		     strcmp(name, run->ports[i].ifname))) {
			run->ports[i].gone = true;
			return &run->ports[i];
		}
	return NULL;
}

/* Sleep until `until` (the backend may work meanwhile: xdp's --alloc). */
static void wait_until(struct vz_us_run *run, double until)
{
	if (run->backend->wait)
		run->backend->wait(run, until);
	else
		vz_sleep_until(until, &run->stop);
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
		wait_until(run, next);
		if (run->backend->tick)
			run->backend->tick(run);
		t = vz_now_s();
		count_once(run, &cur, &prev, t - start, t - last, false);
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
	count_once(run, &cur, &first, t - start, t - start, true);
	if (!gone)
		return 0;
	vz_err("%s disappeared while running; stopped", gone->ifname);
	return -ENODEV;
}

static void print_attached(struct vz_us_run *run)
{
	char what[256] = "";
	int i;

	if (run->backend->attached) {
		run->backend->attached(run);
		fflush(stdout);
		return;
	}
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
		printf("], \"detail\": \"%s\", \"ctl\": \"%s\", "
		       "\"adopted\": %s",
		       what, run->ctl.path, run->adopted ? "true" : "false");
		if (run->handover.old_pid)
			printf(", \"handover_gap_ms\": %.1f",
			       run->handover.gap_ms);
		printf("}\n");
	} else {
		printf("%s on %s:", run->nf.name, what);
		for (i = 0; i < run->nports; i++)
			printf(" %s (port %d, PASS via %s)",
			       run->ports[i].ifname, i, run->ports[i].tap.name);
		printf("; Ctrl-C to stop\n");
	}
	fflush(stdout);
}

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

void vz_run_init(struct vz_us_run *run, const struct vz_backend *backend)
{
	int i;

	memset(run, 0, sizeof(*run));
	run->backend = backend;
	run->workers = 1;
	run->batch = 64;
	run->interval = 1.0;
	run->steer_mode = XDP_MODE_NATIVE;
	run->pmd = "af_xdp";
	run->dispatch = -1;
	run->ctl_gid = VZ_ROOT_ONLY;
	run->ctl_idle = VZ_CTL_IDLE_MS_DEFAULT / 1e3;
	run->handover.fd = -1;
	for (i = 0; i < VZ_MAX_PORTS; i++) {
		run->ports[i].lock.fd = -1;
		run->ports[i].tap.fd = -1;
	}
}

/*
 * The NF's control plane before anything runs: port fields checked, the
 * control socket's map table, and the ops file applied (the NF's state --
 * routes, rules, VIPs -- is in its maps before it runs). 0 or 2.
 */
static int open_control(struct vz_us_run *run)
{
	const struct vz_backend *be = run->backend;
	char err[512];
	int i, ret;

	if (vz_check_port_fields(&run->nf, run->nports, run->ports[0].ifname))
		return 2;
	if (be->in_kernel)
		vz_ctl_init_bpf(&run->ctl, run->nf.obj, run->nf.name, be->name);
	else
		vz_ctl_init_native(&run->ctl, &run->nf.native, be->name);
	for (i = 0; i < run->nports; i++)
		vz_ctl_add_port(&run->ctl, run->ports[i].ifname);
	/* an NF in the kernel may outlive this run: a successor's "leave";
	 * in userspace, a successor takes its state first (take_over.h) */
	run->ctl.stop_run = &run->stop;
	if (!be->in_kernel) {
		run->ctl.pause = vz_us_pause;
		run->ctl.pause_arg = run;
		ret = vz_us_take_over(run);
		if (ret)
			return ret;
	}
	/*
	 * Adopted maps hold the running NF's state (routes, rules, VIPs as
	 * changed since its start, connections): the start-up ops would undo
	 * what ctl changed since, so they are applied only to new maps.
	 */
	if (run->ops_path && run->adopted) {
		fprintf(stderr,
			"veloz: adopting %s's maps as they are; the "
			"config's routes, rules and VIPs are not "
			"applied again (veloz ctl changes them)\n",
			run->nf.name);
	} else if (run->ops_path && vz_ctl_apply_file(&run->ctl, run->ops_path,
						      err, sizeof(err))) {
		vz_err("%s", err);
		return 2;
	}
	return 0;
}

/* Everything that can be refused is refused before attaching. 0, 1 or 2. */
static int open_nf(struct vz_us_run *run, const char *bpf_path,
		   const char *native_path, char **sets, int nsets)
{
	const struct vz_backend *be = run->backend;
	int ret = check_ifaces(run);

	if (ret)
		return ret;
	if (!vz_xdp_privileged()) {
		if (be->in_kernel)
			vz_err("attaching XDP programs needs root "
			       "(CAP_NET_ADMIN and CAP_BPF)");
		else
			vz_err("the %s backend needs root (CAP_NET_ADMIN, "
			       "CAP_BPF and CAP_NET_RAW)",
			       be->name);
		return 1;
	}
	if (be->prepare) {
		ret = be->prepare(run, &bpf_path);
		if (ret)
			return ret;
	}
	/* in the kernel the BPF maps count; the native build is checked */
	if (vz_nf_open(&run->nf, bpf_path, native_path, sets, nsets,
		       be->in_kernel ? 1 : run->workers))
		return 2;
	ret = be->adopt ? be->adopt(run) : 0;
	if (!ret)
		ret = open_control(run);
	if (ret)
		vz_nf_close(&run->nf);
	return ret;
}

/* Signals from here on, so an interrupted start still cleans up. */
static void catch_signals(struct vz_us_run *run)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const char *pid = getenv("VELOZ_RELOAD_PID");
	char *end;
	long n;

	n = pid ? strtol(pid, &end, 10) : 0;
	reload_pid = n > 0 && n <= INT_MAX && !*end ? (pid_t)n : 0;
	signalled_run = run;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a closed stdout (| head) stops us cleanly, not killed attached */
	sigaction(SIGPIPE, &sa, NULL);
}

/* bpffs, then each interface's lock and its stale programs. */
static int claim_ports(struct vz_us_run *run)
{
	char err[256];
	int i;

	if (vz_bpffs_ensure(err, sizeof(err))) {
		vz_err("%s", err);
		return -1;
	}
	if (vz_us_take_over_finish(run))
		return -1;
	for (i = 0; i < run->nports; i++)
		if (run->ports[i].ifindex && !run->claim_later[i] &&
		    vz_claim_port(&run->ports[i].lock, run->ports[i].ifindex,
				  run->ports[i].ifname, run->replace,
				  run->adopt_id[i]))
			return -1;
	return 0;
}

/* Attach or open the ports, start the workers, serve and count. 0 or 1. */
static int run_started(struct vz_us_run *run, bool *started)
{
	const struct vz_backend *be = run->backend;
	char err[512];

	/* TAPs after the ports: a DPDK-only port's MAC is known only then */
	if (be->setup(run) || run->stop || (!be->in_kernel && open_taps(run)))
		return 1;
	if (be->start(run))
		return 1;
	*started = true;
	vz_us_take_over_report(run);
	/* at least 1 ms (0 means the default), at most ~49 days */
	run->ctl.idle_ms = run->ctl_idle * 1e3 >= UINT_MAX
				   ? UINT_MAX
				   : (unsigned int)(run->ctl_idle * 1e3) + 1;
	if (vz_ctl_listen(&run->ctl, run->ctl_gid, err, sizeof(err))) {
		vz_err("%s", err);
		return 1;
	}
	print_attached(run);
	return count_loop(run) ? 1 : 0;
}

int vz_run(struct vz_us_run *run, const char *bpf_path, const char *native_path,
	   char **sets, int nsets)
{
	const struct vz_backend *be = run->backend;
	bool started = false;
	int i, ret;

	ret = open_nf(run, bpf_path, native_path, sets, nsets);
	if (ret)
		return ret;
	catch_signals(run);
	ret = claim_ports(run) ? 1 : run_started(run, &started);
	vz_ctl_close(&run->ctl);
	run->stop = 1;
	if (!started)
		be->join(run);
	if (run->ctl.leave && !be->in_kernel)
		fprintf(stderr,
			"veloz: %s on %s handed over to its successor\n",
			run->nf.name, run->ports[0].ifname);
	be->teardown(run);
	for (i = 0; i < run->nports; i++) {
		vz_tap_close(&run->ports[i].tap);
		vz_iface_unlock(&run->ports[i].lock);
	}
	vz_nf_close(&run->nf);
	signalled_run = NULL;
	return ret;
}
