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
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/counters.h"
#include "common/run_options.h"
#include "runtime/peercred.h"
#include "dispatch/dispatch.h"
#include "cli/ports.h"
#include "runtime/clock.h"
#include "runtime/userspace.h"

static struct vz_us_run *signalled_run;

static void on_signal(int sig)
{
	(void)sig;
	if (signalled_run)
		signalled_run->stop = 1;
}

void vz_us_worker_enter(unsigned int worker)
{
	vz_worker_id = worker;
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

/* What the command line gives besides struct vz_us_run's own fields. */
static struct us_cli {
	struct vz_nf_args nf;
	int pmd; /* index into pmd_names */
} cli;

static const char *const pmd_names[] = { "af_xdp", "af_packet", "eal", NULL };
static const char *const mode_names[] = { "native", "skb", NULL };
static const int mode_values[] = { XDP_MODE_NATIVE, XDP_MODE_SKB };

/* --iface, once per port. */
static int opt_iface(const struct vz_option *opt, const char *text, void *dst,
		     void *cfg)
{
	struct vz_us_run *run = cfg;

	(void)opt;
	(void)dst;
	if (run->nports == VZ_MAX_PORTS) {
		vz_err("at most %d ports", VZ_MAX_PORTS);
		return -EINVAL;
	}
	run->ports[run->nports++].ifname = text;
	return 0;
}

/* --copy, --zero-copy: the last one given wins. */
static int opt_copy(const struct vz_option *opt, const char *text, void *dst,
		    void *cfg)
{
	(void)text;
	(void)cfg;
	*(enum vz_xsk_copy *)dst =
		strcmp(opt->name, "copy") ? VZ_XSK_ZEROCOPY : VZ_XSK_COPY;
	return 0;
}

_Static_assert(VZ_MAX_SETS == VZ_OPT_LIST_MAX, "--set holds VZ_MAX_SETS");

#define US_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct vz_us_run, member, __VA_ARGS__)

/*
 * Every backend's rows; those after "busy-poll" belong to some backends
 * only (be->options says which) and are hidden from the others.
 */
static struct vz_option us_options[] = {
	VZ_NF_OPTIONS(&cli.nf),
	US_OPT("iface", VZ_OPT_CUSTOM, ports, .parse = opt_iface,
	       .required = true, .repeat = true, .type_name = "ifname",
	       .metavar = "IF", .help = "a port (once per port)"),
	VZ_RUN_OPTIONS(struct vz_us_run),
	US_OPT("workers", VZ_OPT_U64, workers, .min = 1, .max = VZ_MAX_WORKERS,
	       .metavar = "N", .help = "threads running the NF"),
	US_OPT("queues", VZ_OPT_U64, queues, .min = 1, .max = VZ_MAX_WORKERS,
	       .no_default = true, .metavar = "N",
	       .help = "receive queues per port (default: --workers)"),
	US_OPT("batch", VZ_OPT_U64, batch, .min = 1, .max = VZ_US_BATCH_MAX,
	       .metavar = "N", .help = "frames per receive burst"),
	US_OPT("busy-poll", VZ_OPT_FLAG, busy_poll, .help = "busy-poll"),
	US_OPT("copy", VZ_OPT_FLAG, copy, .parse = opt_copy,
	       .help = "AF_XDP copy mode"),
	US_OPT("zero-copy", VZ_OPT_FLAG, copy, .parse = opt_copy,
	       .help = "AF_XDP zero-copy mode"),
	US_OPT("mode", VZ_OPT_ENUM, steer_mode, .choices = mode_names,
	       .values = mode_values, .metavar = "native|skb",
	       .help = "the steering program's XDP mode"),
	VZ_OPTION_PTR("pmd", VZ_OPT_ENUM, &cli.pmd, .choices = pmd_names,
		      .metavar = "af_xdp|af_packet|eal",
		      .help = "the DPDK poll-mode driver"),
	US_OPT("no-huge", VZ_OPT_FLAG, no_huge, .help = "no hugepages"),
	US_OPT("dispatch", VZ_OPT_ENUM, dispatch,
	       .choices = vz_dispatch_policy_names,
	       .nchoices = VZ_DISPATCH_POLICIES, .metavar = "POLICY",
	       .help = "spread flows over --workers by this policy"),
	VZ_OPTION_END,
};

static const char *const us_first_backend_option = "busy-poll";

static void set_usage(const struct vz_backend *be, char *buf, size_t len)
{
	const char *const *opt;
	size_t n;

	n = (size_t)snprintf(
		buf, len,
		"usage: vz-%s run --bpf NF.bpf.o --native NF.so --iface IF "
		"[--iface IF]...\n"
		"         [--set KEY=VALUE]... [--json] [--interval S] "
		"[--duration S] [--replace]\n"
		"         [--workers N] [--queues N] [--batch N] [--ops FILE]"
		" [--ctl-group GROUP]",
		be->name);
	for (opt = be->options; opt && *opt && n < len; opt++)
		n += (size_t)snprintf(buf + n, len - n, " %s", *opt);
	if (n < len)
		snprintf(buf + n, len - n, "\n");
}

/* Hide the rows of other backends' options; refuse them if given. */
static int backend_rows(const struct vz_backend *be, bool check)
{
	struct vz_option *opt = us_options;

	while (strcmp(opt->name, us_first_backend_option))
		opt++;
	for (; opt->name; opt++) {
		opt->hidden = !backend_has(be, opt->name);
		if (check && opt->hidden && opt->seen) {
			vz_err("--%s is not an option of the %s backend",
			       opt->name, be->name);
			return 2;
		}
	}
	return 0;
}

static int parse_args(struct vz_us_run *run, int argc, char **argv,
		      const char **bpf_path, const char **native_path,
		      char **sets, int *nsets)
{
	const struct vz_backend *be = run->backend;
	char usage[1024];
	struct vz_opts o = { .usage = usage,
			     .table = us_options,
			     .subcommand = "run",
			     .stop_at_nonopt = true };
	char prog[32];
	int next;

	snprintf(prog, sizeof(prog), "vz-%s", be->name);
	o.prog = prog;
	set_usage(be, usage, sizeof(usage));
	backend_rows(be, false);
	cli.pmd = 0; /* af_xdp */
	/* "--" ends the options; what follows is the EAL's */
	if (vz_opts_parse(&o, run, argc, argv, &next))
		return 2;
	if (backend_rows(be, true))
		return 2;
	if (next < argc && !strcmp(argv[next - 1], "--")) {
		run->extra_args = &argv[next];
		run->nextra = argc - next;
	} else if (next != argc) {
		vz_err("%s: unexpected argument '%s' (see --help)", prog,
		       argv[next]);
		return 2;
	}
	run->pmd = pmd_names[cli.pmd];
	*bpf_path = cli.nf.bpf_path;
	*native_path = cli.nf.native_path;
	memcpy(sets, cli.nf.sets.v, sizeof(*sets) * (size_t)cli.nf.sets.n);
	*nsets = cli.nf.sets.n;
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

static int rx_queue_count(const char *ifname)
{
	char path[128];
	struct dirent *ent;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	dir = opendir(path);
	if (!dir)
		return 1;
	while ((ent = readdir(dir)))
		n += !strncmp(ent->d_name, "rx-", 3);
	closedir(dir);
	return n ? n : 1;
}

static int read_link(struct vz_us_port *port)
{
	struct ifreq ifr = { 0 };
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (sock < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", port->ifname);
	if (ioctl(sock, SIOCGIFHWADDR, &ifr))
		ret = -errno;
	else
		memcpy(port->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (!ret && ioctl(sock, SIOCGIFMTU, &ifr))
		ret = -errno;
	else
		port->mtu = ifr.ifr_mtu;
	close(sock);
	port->rx_queues = rx_queue_count(port->ifname);
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
