// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-xdp run: an NF on live interfaces at the XDP hook (native or generic),
 * loaded and attached through libxdp, with per-interval counters read from
 * the NF's own per-CPU maps. Detaches on SIGINT, SIGTERM, SIGHUP or after
 * --duration (and when stdout goes away); refuses, or with --replace removes, a
 * program a killed run left behind.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "cli/common.h"
#include "runtime/clock.h"
#include "xdp/attach.h"

struct port {
	const char *ifname;
	int ifindex;
	bool attached;
	struct vz_iface_lock lock;
};

struct runner {
	struct vz_nf nf;
	struct xdp_program *prog;
	enum xdp_attach_mode mode;
	struct port ports[VZ_MAX_PORTS];
	int nports;
	bool json;
	bool replace;
	double interval;
	double duration; /* 0: until stopped */
	int ncpus;
	struct vz_stat *percpu;
	int stats_fd;
	int redirects_fd;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: vz-xdp run --bpf NF.bpf.o --native NF.so --iface IF "
		"[--iface IF]...\n"
		"                  [--mode native|skb] [--set KEY=VALUE]... "
		"[--json]\n"
		"                  [--interval S] [--duration S] [--replace]\n");
}

/* Sum a per-CPU vz_stat map entry over CPUs. */
static struct vz_stat read_stat(struct runner *r, int fd, __u32 key)
{
	struct vz_stat total = { 0 };
	int cpu;

	if (bpf_map_lookup_elem(fd, &key, r->percpu))
		return total;
	for (cpu = 0; cpu < r->ncpus; cpu++) {
		total.packets += r->percpu[cpu].packets;
		total.bytes += r->percpu[cpu].bytes;
	}
	return total;
}

struct snapshot {
	struct vz_stat verdict[VZ_VERDICT_COUNT];
	struct vz_stat total;
};

static void take_snapshot(struct runner *r, struct snapshot *s)
{
	__u32 v;

	memset(s, 0, sizeof(*s));
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		s->verdict[v] = read_stat(r, r->stats_fd, v);
		s->total.packets += s->verdict[v].packets;
		s->total.bytes += s->verdict[v].bytes;
	}
}

static void print_stats(struct runner *r, const struct snapshot *s,
			const struct snapshot *prev, double t, double dt,
			bool summary)
{
	double pps =
		dt > 0 ? (double)(s->total.packets - prev->total.packets) / dt
		       : 0;
	double bps =
		dt > 0 ? (double)(s->total.bytes - prev->total.bytes) * 8 / dt
		       : 0;
	int v, p;

	if (r->json) {
		printf("{%s\"t\": %.3f, \"nf\": \"%s\", \"packets\": %llu, "
		       "\"bytes\": %llu, \"pps\": %.0f, \"bps\": %.0f",
		       summary ? "\"summary\": true, " : "", t, r->nf.name,
		       (unsigned long long)s->total.packets,
		       (unsigned long long)s->total.bytes, pps, bps);
		for (v = 0; v < VZ_VERDICT_COUNT; v++)
			printf(", \"%s\": %llu", vz_verdict_name(v),
			       (unsigned long long)s->verdict[v].packets);
		printf(", \"redirected\": {");
		for (p = 0; p < r->nports; p++)
			printf("%s\"%s\": %llu", p ? ", " : "",
			       r->ports[p].ifname,
			       (unsigned long long)read_stat(r, r->redirects_fd,
							     (__u32)p)
				       .packets);
		printf("}}\n");
	} else {
		if (summary)
			printf("total %7.1fs %12llu pkts %14llu bytes "
			       "%10.0f pps avg",
			       t, (unsigned long long)s->total.packets,
			       (unsigned long long)s->total.bytes, pps);
		else
			printf("%13.1fs %12llu pkts %14llu bytes %10.0f pps "
			       "%8.1f Mbit/s",
			       t, (unsigned long long)s->total.packets,
			       (unsigned long long)s->total.bytes, pps,
			       bps / 1e6);
		for (v = 1; v <= VZ_VERDICT_COUNT; v++) {
			int verdict = v % VZ_VERDICT_COUNT;

			printf("  %s %llu", vz_verdict_name(verdict),
			       (unsigned long long)s->verdict[verdict].packets);
		}
		printf("\n");
	}
	fflush(stdout);
}

/* Refuse, or with --replace remove, what another run left on a port. */
static int check_port(struct runner *r, struct port *port)
{
	struct vz_xdp_attached now;
	char err[256];
	int ret;

	ret = vz_iface_lock(&port->lock, port->ifindex, port->ifname, err,
			    sizeof(err));
	if (ret) {
		vz_err("%s", err);
		return ret;
	}
	ret = vz_xdp_query(port->ifindex, &now);
	if (ret) {
		vz_err("cannot query XDP on %s: %s", port->ifname,
		       strerror(-ret));
		return ret;
	}
	if (!now.any)
		return 0;
	if (!strcmp(now.names, VZ_TESTBED_RX_PROG)) {
		ret = vz_xdp_detach_all(port->ifindex);
		if (ret)
			vz_err("cannot replace the testbed's receive program on "
			       "%s: %s",
			       port->ifname, strerror(-ret));
		return ret;
	}
	if (!now.ours) {
		vz_err("%s already has an XDP program that is not veloz's (%s, "
		       "%s mode); detach it first, e.g. xdp-loader unload %s "
		       "--all",
		       port->ifname, now.names, vz_xdp_mode_name(now.mode),
		       port->ifname);
		return -EBUSY;
	}
	/* Ours, and the lock was free: a run that died without cleaning up. */
	if (!r->replace) {
		vz_err("%s has a stale veloz program (%s, %s mode, id %u) left "
		       "by a run that was killed; rerun with --replace to "
		       "remove it",
		       port->ifname, now.names, vz_xdp_mode_name(now.mode),
		       now.prog_id);
		return -EEXIST;
	}
	ret = vz_xdp_detach_all(port->ifindex);
	if (ret) {
		vz_err("cannot remove the stale program from %s: %s",
		       port->ifname, strerror(-ret));
		return ret;
	}
	fprintf(stderr, "veloz: removed stale veloz program %s from %s\n",
		now.names, port->ifname);
	return 0;
}

/*
 * A config field named "port" is a port number of this run (the Python
 * front end turns interface names into them): one that names no port would
 * turn every redirect into an aborted packet, so it is refused up front.
 */
static int check_port_fields(struct runner *r)
{
	const struct vz_config_field *field;
	__u64 port;
	__u32 i;

	for (i = 0; i < r->nf.cfg.nfields; i++) {
		field = &r->nf.cfg.fields[i];
		if (strcmp(field->name, "port"))
			continue;
		port = vz_config_get(&r->nf.cfg, field);
		if (port >= (__u64)r->nports) {
			vz_err("config port %llu is not a port of this run (it "
			       "has %d: %s%s); add the interface with --iface "
			       "or name it in the config",
			       (unsigned long long)port, r->nports,
			       r->ports[0].ifname,
			       r->nports > 1 ? ", ..." : "");
			return -EINVAL;
		}
	}
	return 0;
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

	r->prog = xdp_program__from_bpf_obj(r->nf.obj, NULL);
	err = (int)libxdp_get_error(r->prog);
	if (err) {
		r->prog = NULL;
		vz_err("libxdp cannot use %s: %s", r->nf.name, strerror(-err));
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
		printf("]}\n");
	} else {
		printf("%s attached in %s mode to", r->nf.name,
		       vz_xdp_mode_name(r->mode));
		for (i = 0; i < r->nports; i++)
			printf(" %s (port %d)", r->ports[i].ifname, i);
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

/* 0, or -ENODEV when a port vanished (the run stops, counters printed). */
static int count_loop(struct runner *r)
{
	struct port *gone = NULL;
	struct snapshot first, prev, cur;
	double start = vz_now_s(), last = start, next = start, t;

	take_snapshot(r, &first);
	prev = first;
	while (!stop_signal) {
		next += r->interval;
		if (r->duration > 0 && next > start + r->duration)
			next = start + r->duration;
		vz_sleep_until(next, &stop_signal);
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
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
			errno = 0;
			double value = strtod(optarg, &end);

			if (errno || *end || end == optarg || value <= 0) {
				vz_err("--%s must be a positive number of "
				       "seconds, not '%s'",
				       opt == 't' ? "interval" : "duration",
				       optarg);
				return 2;
			}
			if (opt == 't')
				r->interval = value;
			else
				r->duration = value;
			break;
		case 'r':
			r->replace = true;
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
	return 0;
}

int main(int argc, char **argv)
{
	const char *bpf_path = NULL, *native_path = NULL;
	struct runner r = { .mode = XDP_MODE_NATIVE, .interval = 1.0 };
	struct sigaction sa = { .sa_handler = on_signal };
	char *sets[VZ_MAX_SETS], err[256];
	int i, j, nsets = 0, ret;

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
	if (vz_nf_open(&r.nf, bpf_path, native_path, sets, nsets, 1))
		return 2;
	if (check_port_fields(&r)) {
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
	for (i = 0; i < r.nports; i++)
		if (check_port(&r, &r.ports[i]))
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
	print_attached(&r);
	ret = count_loop(&r) ? 1 : 0;
out:
	detach_all(&r);
	xdp_program__close(r.prog); /* leaves our bpf_object open */
	vz_nf_close(&r.nf);
	free(r.percpu);
	return ret;
}
