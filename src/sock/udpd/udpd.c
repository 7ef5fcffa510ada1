/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * vz-udpd: the poller of veloz's userspace UDP/IP stack (`veloz udpd`).
 *
 * One thread owns one interface through AF_XDP (src/sock/port) and runs, in
 * a loop: received frames through the protocol engine (stack/), datagrams
 * for local ports onto the applications' receive rings and the
 * applications' transmit rings through the engine onto the port
 * (src/sock/poller), and the engine's timers once per millisecond. It polls,
 * as UDPDK's poller does: latency is the point; it yields the CPU when a
 * round finds nothing to do. After --busy-poll-us with nothing to do it
 * sleeps, as AF_XDP's need_wakeup lets a driver sleep: on the AF_XDP
 * sockets, the control connections and the doorbell that applications
 * write when they queue a datagram for a sleeping poller. An idle stack
 * costs no CPU; a busy one never makes a system call to wait.
 *
 * Every argument is checked before the interface is touched. SIGINT and
 * SIGTERM detach the steering program, close every application's link and
 * remove the control socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <veloz/sock.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/iface.h"
#include "common/options.h"
#include "common/parse.h"
#include "sock/poller/server.h"
#include "sock/stack/stack.h"
#include "sock/port/port.h"
#include "sock/udpd/stats.h"
#include "sock/udpd/steer6.h"

#define RX_BUDGET 256
#define TX_BUDGET 256
#define IDLE_SPINS 256 /* empty rounds before yielding the CPU */
#define BUSY_POLL_US 1000 /* idle this long, then sleep */
#define SLEEP_MAX_MS 100 /* the longest sleep: the interface check's period */

struct opts {
	const char *ifname, *socket_path;
	const char
		*stats_file; /* the latest stats line, for status and metrics */
	struct vz_stack_config stack;
	struct vz_sock_server_config server;
	bool skb_mode, copy, replace, json, mac_set;
	int cpu;
	__u32 busy_poll_us;
	__u64 interval_ms;
	double interval_s; /* interval_ms, for the loop */
};

struct udpd {
	struct vz_udpd_port *port;
	struct vz_stack *stack;
	struct vz_sock_server *server;
	__u64 now;
	__u64 sleeps; /* times the loop slept, idle */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char usage[] =
	"usage: vz-udpd --iface IF --ip A.B.C.D/LEN [--mac MAC] [--gateway "
	"A.B.C.D]\n"
	"  [--ip6 ADDR/LEN] [--gateway6 ADDR]\n"
	"  [--neigh A.B.C.D=MAC]... [--mtu N] [--socket PATH] [--group "
	"NAME|GID]\n"
	"  [--rcvbuf BYTES] [--sndbuf BYTES] [--max-apps N] [--max-sockets N]\n"
	"  [--arp-timeout-ms N] [--reasm-timeout-ms N] [--reasm-max-bytes N]\n"
	"  [--cpu N] [--busy-poll-us N] [--skb-mode] [--copy] [--replace]\n"
	"  [--interval-ms N] [--json] [--stats-file PATH]\n";

static int parse_ip4(const char *what, const char *text, __be32 *out)
{
	struct in_addr a;

	if (inet_pton(AF_INET, text, &a) != 1) {
		vz_err("%s: not an IPv4 address: %s", what, text);
		return -1;
	}
	*out = a.s_addr;
	return 0;
}

/* A unicast address the stack may own or talk to. */
static bool unicast(__be32 ip)
{
	__u32 h = ntohl(ip);

	return h && h != 0xffffffffu && (h >> 28) != 0xe && (h >> 24) != 127;
}

static int parse_prefix(const char *text, struct vz_stack_config *c)
{
	char buf[64], *slash;
	__u64 len;

	snprintf(buf, sizeof(buf), "%s", text);
	slash = strchr(buf, '/');
	if (!slash) {
		vz_err("--ip: give the address with its prefix, as "
		       "198.18.0.3/24: %s",
		       text);
		return -1;
	}
	*slash = 0;
	if (parse_ip4("--ip", buf, &c->ip4) ||
	    vz_parse_u64("--ip prefix length", slash + 1, 1, 32, &len))
		return -1;
	if (!unicast(c->ip4)) {
		vz_err("--ip: %s is not a unicast address", buf);
		return -1;
	}
	c->prefix_len = (__u8)len;
	return 0;
}

/* --ip6 ADDR/LEN, --gateway6 ADDR (the stack judges the addresses). */
static int parse_ip6(const char *what, const char *text, __u8 *ip,
		     __u8 *prefix_len)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash;
	__u64 len;

	snprintf(buf, sizeof(buf), "%s", text);
	slash = strchr(buf, '/');
	if (!prefix_len != !slash) {
		vz_err("%s: %s: %s", what,
		       prefix_len ? "give the address with its prefix, as "
				    "fd00:198:18::3/64"
				  : "an address without a prefix",
		       text);
		return -1;
	}
	if (slash)
		*slash = 0;
	if (inet_pton(AF_INET6, buf, ip) != 1) {
		vz_err("%s: not an IPv6 address: %s", what, buf);
		return -1;
	}
	if (slash) {
		if (vz_parse_u64("--ip6 prefix length", slash + 1, 1, 128,
				 &len))
			return -1;
		*prefix_len = (__u8)len;
	}
	return 0;
}

static int parse_neigh(const char *text, struct vz_stack_config *c)
{
	char buf[64], *eq;
	struct vz_stack_neigh *n;

	if (c->nneigh == VZ_STACK_MAX_NEIGH) {
		vz_err("--neigh: at most %d static neighbours",
		       VZ_STACK_MAX_NEIGH);
		return -1;
	}
	n = &c->neigh[c->nneigh];
	snprintf(buf, sizeof(buf), "%s", text);
	eq = strchr(buf, '=');
	if (!eq) {
		vz_err("--neigh: expected A.B.C.D=MAC: %s", text);
		return -1;
	}
	*eq = 0;
	if (parse_ip4("--neigh", buf, &n->ip4))
		return -1;
	if (vz_parse_mac(eq + 1, n->mac)) {
		vz_err("--neigh: not a MAC address: %s", eq + 1);
		return -1;
	}
	c->nneigh++;
	return 0;
}

/* Option-table adapters for the parsers above: DST is the row's field. */
static int opt_ip(const struct vz_option *opt, const char *text, void *dst,
		  void *cfg)
{
	(void)opt;
	(void)cfg;
	return parse_prefix(text, dst);
}

static int opt_ip6(const struct vz_option *opt, const char *text, void *dst,
		   void *cfg)
{
	struct vz_stack_config *c = dst;

	(void)opt;
	(void)cfg;
	return parse_ip6("--ip6", text, c->ip6, &c->prefix6_len);
}

static int opt_gateway6(const struct vz_option *opt, const char *text,
			void *dst, void *cfg)
{
	(void)opt;
	(void)cfg;
	return parse_ip6("--gateway6", text, dst, NULL);
}

static int opt_neigh(const struct vz_option *opt, const char *text, void *dst,
		     void *cfg)
{
	(void)opt;
	(void)cfg;
	return parse_neigh(text, dst);
}

static int opt_gateway(const struct vz_option *opt, const char *text, void *dst,
		       void *cfg)
{
	(void)opt;
	(void)cfg;
	if (parse_ip4("--gateway", text, dst))
		return -1;
	if (!unicast(*(__be32 *)dst)) {
		vz_err("--gateway: %s is not a unicast address", text);
		return -1;
	}
	return 0;
}

#define UDPD_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct opts, member, __VA_ARGS__)

/* The limits here are the only ones: `veloz udpd` reads them from
 * --describe-options (python/veloz/control/udpd.py). */
static struct vz_option udpd_options[] = {
	UDPD_OPT("iface", VZ_OPT_IFNAME, ifname, .required = true,
		 .metavar = "IF", .help = "the interface to serve"),
	UDPD_OPT("ip", VZ_OPT_CUSTOM, stack, .parse = opt_ip, .required = true,
		 .type_name = "ipv4-prefix", .metavar = "A.B.C.D/LEN",
		 .help = "the stack's unicast IPv4 address and prefix"),
	UDPD_OPT("ip6", VZ_OPT_CUSTOM, stack, .parse = opt_ip6,
		 .type_name = "ipv6-prefix", .metavar = "ADDR/LEN",
		 .help = "the stack's IPv6 address and prefix"),
	UDPD_OPT("gateway6", VZ_OPT_CUSTOM, stack.gateway6,
		 .parse = opt_gateway6, .type_name = "ipv6", .metavar = "ADDR",
		 .help = "an IPv6 router"),
	UDPD_OPT("mac", VZ_OPT_MAC, stack.mac, .metavar = "MAC",
		 .help = "the stack's MAC (default: the interface's)"),
	UDPD_OPT("gateway", VZ_OPT_CUSTOM, stack.gateway, .parse = opt_gateway,
		 .type_name = "ipv4", .metavar = "A.B.C.D",
		 .help = "the IPv4 router"),
	UDPD_OPT("neigh", VZ_OPT_CUSTOM, stack, .parse = opt_neigh,
		 .repeat = true, .type_name = "neighbour",
		 .metavar = "A.B.C.D=MAC", .help = "a static ARP entry"),
	UDPD_OPT("mtu", VZ_OPT_U64, stack.mtu, .min = 576, .max = 9000,
		 .no_default = true, .metavar = "N", .help = "IP MTU (1500)"),
	UDPD_OPT("socket", VZ_OPT_STRING, socket_path, .metavar = "PATH",
		 .help = "the control socket"),
	UDPD_OPT("group", VZ_OPT_GROUP, server.gid, .metavar = "NAME|GID",
		 .help = "may connect besides root"),
	UDPD_OPT("rcvbuf", VZ_OPT_U64, server.default_rcvbuf, .min = 4096,
		 .max = 1u << 30, .no_default = true, .metavar = "BYTES",
		 .help = "default receive ring per socket"),
	UDPD_OPT("sndbuf", VZ_OPT_U64, server.default_sndbuf, .min = 4096,
		 .max = 1u << 30, .no_default = true, .metavar = "BYTES",
		 .help = "default send ring per socket"),
	UDPD_OPT("max-apps", VZ_OPT_U64, server.max_apps, .min = 1, .max = 4096,
		 .no_default = true, .metavar = "N",
		 .help = "connected applications at once"),
	UDPD_OPT("max-sockets", VZ_OPT_U64, server.max_sockets, .min = 1,
		 .max = 65536, .no_default = true, .metavar = "N",
		 .help = "sockets at once"),
	UDPD_OPT("arp-timeout-ms", VZ_OPT_U64, stack.arp_timeout_ms, .min = 100,
		 .max = 86400000, .no_default = true, .metavar = "N",
		 .help = "ARP cache entry lifetime"),
	UDPD_OPT("reasm-timeout-ms", VZ_OPT_U64, stack.reasm_timeout_ms,
		 .min = 10, .max = 60000, .no_default = true, .metavar = "N",
		 .help = "how long a partial datagram waits"),
	UDPD_OPT("reasm-max-bytes", VZ_OPT_U64, stack.reasm_max_bytes,
		 .min = 65536, .max = 1u << 30, .no_default = true,
		 .metavar = "N", .help = "all partial datagrams together"),
	UDPD_OPT("cpu", VZ_OPT_U64, cpu, .min = 0, .max = CPU_SETSIZE - 1,
		 .no_default = true, .metavar = "N", .help = "pin the poller"),
	UDPD_OPT("busy-poll-us", VZ_OPT_U64, busy_poll_us, .min = 0,
		 .max = 1000000, .metavar = "N",
		 .help = "spin this long idle, then sleep"),
	UDPD_OPT("skb-mode", VZ_OPT_FLAG, skb_mode,
		 .help = "generic XDP (any interface)"),
	UDPD_OPT("copy", VZ_OPT_FLAG, copy, .help = "force AF_XDP copy mode"),
	UDPD_OPT("replace", VZ_OPT_FLAG, replace,
		 .help = "replace an XDP program already attached"),
	UDPD_OPT("interval-ms", VZ_OPT_U64, interval_ms, .min = 1,
		 .max = 3600000, .metavar = "N", .help = "stats period"),
	UDPD_OPT("json", VZ_OPT_FLAG, json, .help = "stats as JSON lines"),
	UDPD_OPT("stats-file", VZ_OPT_STRING, stats_file, .metavar = "PATH",
		 .help = "the latest stats line, for status and metrics"),
	VZ_OPTION_END,
};

static const struct vz_opts udpd_opts = {
	.prog = "vz-udpd",
	.usage = usage,
	.table = udpd_options,
};

static int parse_args(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){ .cpu = -1,
			    .interval_ms = 1000,
			    .busy_poll_us = BUSY_POLL_US };
	o->server.gid = (gid_t)-1;
	o->socket_path = VZ_UDPD_DEFAULT_SOCKET;
	if (vz_opts_parse(&udpd_opts, o, argc, argv, NULL))
		return -1;
	o->interval_s = (double)o->interval_ms / 1000;
	o->mac_set = vz_opts_given(&udpd_opts, "mac");
	o->server.path = o->socket_path;
	o->server.local_ip4 = o->stack.ip4;
	memcpy(o->server.local_ip6, o->stack.ip6, 16);
	return 0;
}

/* ---- the loop -------------------------------------------------------- */

static int port_tx(void *opaque, const void *frame, size_t len)
{
	struct udpd *u = opaque;

	return vz_udpd_port_tx(u->port, frame, len);
}

static int deliver(void *opaque, const struct vz_dgram_meta *m,
		   const void *payload, size_t len)
{
	struct udpd *u = opaque;

	return vz_sock_server_deliver(u->server, m, payload, len);
}

static int send_dgram(void *opaque, const struct vz_dgram_meta *m,
		      const void *payload, size_t len)
{
	struct udpd *u = opaque;

	return vz_stack_send(u->stack, m, payload, len, u->now);
}

static void on_frame(void *opaque, const void *frame, size_t len)
{
	struct udpd *u = opaque;

	vz_stack_input(u->stack, frame, len, u->now);
}

static void print_stats(const struct udpd *u, FILE *f, const char *event,
			bool json, double t)
{
	const struct vz_udpd_counters c = { u->stack, u->server, u->port,
					    u->sleeps };

	vz_udpd_print_stats(&c, f, event, json, t);
}

/*
 * The same JSON line into o->stats_file, whole or not at all (a reader
 * never sees half a line): `veloz status` and `veloz udpd --metrics` read
 * it, as stdout is the user's.
 */
static void write_stats_file(const struct opts *o, const struct udpd *u,
			     double t)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (!o->stats_file || snprintf(tmp, sizeof(tmp), "%s.tmp",
				       o->stats_file) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "we");
	if (!f)
		return;
	print_stats(u, f, "stats", true, t);
	if (fclose(f) || rename(tmp, o->stats_file))
		unlink(tmp);
}

static void print_ready(const struct opts *o, const struct udpd *u)
{
	char ip[INET_ADDRSTRLEN], ip6[INET6_ADDRSTRLEN + 8] = "";
	const __u8 *m = o->stack.mac;

	inet_ntop(AF_INET, &o->stack.ip4, ip, sizeof(ip));
	if (o->stack.prefix6_len) {
		inet_ntop(AF_INET6, o->stack.ip6, ip6, INET6_ADDRSTRLEN);
		snprintf(ip6 + strlen(ip6), 8, "/%u", o->stack.prefix6_len);
	}
	if (o->json)
		printf("{\"event\": \"ready\", \"iface\": \"%s\", \"ip\": "
		       "\"%s/%u\", \"ip6\": \"%s\", \"mac\": "
		       "\"%02x:%02x:%02x:%02x:%02x:%02x\", \"socket\": \"%s\", "
		       "\"queues\": %u, \"mode\": \"%s\"}\n",
		       o->ifname, ip, o->stack.prefix_len, ip6, m[0], m[1],
		       m[2], m[3], m[4], m[5], o->socket_path,
		       vz_udpd_port_queues(u->port),
		       o->skb_mode ? "skb" : "native");
	else
		printf("udpd on %s: %s/%u%s%s, %02x:%02x:%02x:%02x:%02x:%02x, "
		       "applications connect to %s (Ctrl-C stops)\n",
		       o->ifname, ip, o->stack.prefix_len, *ip6 ? " " : "", ip6,
		       m[0], m[1], m[2], m[3], m[4], m[5], o->socket_path);
	fflush(stdout);
}

/*
 * Sleep until a frame arrives, an application asks or queues something,
 * or `ms` pass. Not at all when a transmit ring filled meanwhile (the
 * applications saw no poller_asleep word before their records).
 */
static void idle_sleep(struct udpd *u, int ms)
{
	struct pollfd p[VZ_UDPD_MAX_QUEUES + 1];
	int fds[VZ_UDPD_MAX_QUEUES];
	unsigned int n, i;

	if (vz_sock_server_sleep_prepare(u->server)) {
		n = vz_udpd_port_fds(u->port, fds, VZ_UDPD_MAX_QUEUES);
		for (i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = fds[i],
						.events = POLLIN };
		p[n++] = (struct pollfd){ .fd = vz_sock_server_fd(u->server),
					  .events = POLLIN };
		if (poll(p, n, ms) >= 0)
			u->sleeps++;
	}
	vz_sock_server_sleep_done(u->server);
}

/* When the loop does what it does not do every round (ns, CLOCK_MONOTONIC). */
struct loop_clock {
	__u64 start, next_tick, next_check, next_stats, last_work;
	unsigned int idle; /* rounds without work in a row */
};

/* The stack's timers each millisecond, the interface's presence each
 * 100 ms, the counters each interval: -ENODEV when the interface went
 * away, else 0. */
static int loop_timers(const struct opts *o, struct udpd *u,
		       struct loop_clock *c)
{
	if (u->now >= c->next_tick) {
		vz_stack_tick(u->stack, u->now);
		c->next_tick = u->now + 1000000;
	}
	/* An interface deleted under AF_XDP delivers nothing more and gives
	 * no error: look for it, as `veloz run` does. */
	if (u->now >= c->next_check) {
		if (!vz_udpd_port_present(u->port))
			return -ENODEV;
		c->next_check = u->now + 100000000;
	}
	if (u->now >= c->next_stats) {
		print_stats(u, stdout, "stats", o->json,
			    (double)(u->now - c->start) / 1e9);
		write_stats_file(o, u, (double)(u->now - c->start) / 1e9);
		c->next_stats = u->now + (__u64)(o->interval_s * 1e9);
	}
	return 0;
}

/* Milliseconds until `wake` (rounded up), at most SLEEP_MAX_MS. */
static int sleep_ms(__u64 wake, __u64 now)
{
	__u64 ms = (wake - now) / 1000000;

	return ms < SLEEP_MAX_MS ? (int)ms + 1 : SLEEP_MAX_MS;
}

/* Nothing to do: let an application sharing the CPU run; nothing for
 * long (the busy-poll time): sleep until something comes or a timer. */
static void loop_idle(const struct opts *o, struct udpd *u,
		      struct loop_clock *c, unsigned int work)
{
	__u64 wake;

	if (work) {
		c->idle = 0;
		c->last_work = u->now;
		return;
	}
	if (++c->idle % IDLE_SPINS)
		return;
	wake = c->next_check < c->next_stats ? c->next_check : c->next_stats;
	if (u->now - c->last_work >= o->busy_poll_us * 1000ull && wake > u->now)
		idle_sleep(u, sleep_ms(wake, u->now));
	else
		sched_yield();
}

/* 0 when stopped by a signal, -ENODEV when the interface went away. */
static int run(const struct opts *o, struct udpd *u)
{
	__u64 start = vz_now_ns();
	struct loop_clock c = { start, start, start, 0, start, 0 };
	unsigned int work, round;
	int ret = 0;

	c.next_stats = start + (__u64)(o->interval_s * 1e9);
	while (!stop) {
		u->now = vz_now_ns();
		work = vz_udpd_port_rx(u->port, on_frame, u, RX_BUDGET);
		work += vz_sock_server_poll(u->server, send_dgram, u,
					    TX_BUDGET);
		vz_udpd_port_flush(u->port);
		ret = loop_timers(o, u, &c);
		if (ret)
			break;
		loop_idle(o, u, &c, work);
	}
	/* What applications did before the stop (a close, an exit) is in
	 * the kernel already: take it in, so the summary is the state at the
	 * end. Bounded: one that keeps sending cannot hold the stop up. */
	for (work = !ret, round = 0; work && round < 64; round++) {
		work = vz_sock_server_poll(u->server, send_dgram, u, TX_BUDGET);
		vz_udpd_port_flush(u->port);
	}
	print_stats(u, stdout, "summary", o->json,
		    (double)(vz_now_ns() - start) / 1e9);
	if (o->stats_file)
		unlink(o->stats_file); /* nothing left in /run */
	if (ret)
		vz_err("%s disappeared while running; stopped", o->ifname);
	return ret;
}

static int pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		vz_err("--cpu %d: %s", cpu, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct vz_udpd_port_config pcfg = { 0 };
	struct vz_stack_ops ops;
	struct sigaction sa = { .sa_handler = on_signal };
	struct udpd u = { 0 };
	struct opts o;
	char err[256] = "";
	int rc = 1;

	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	if (parse_args(&o, argc, argv))
		return 2;
	vz_quiet_bpf_logs();
	if (pin(o.cpu))
		return 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	pcfg = (struct vz_udpd_port_config){ .ifname = o.ifname,
					     .ip4 = o.stack.ip4,
					     .skb_mode = o.skb_mode,
					     .copy = o.copy,
					     .replace = o.replace };
	if (!o.mac_set && vz_iface_mac(o.ifname, o.stack.mac)) {
		vz_err("no interface %s", o.ifname);
		return 2;
	}
	/* The stack checks its config and the control socket refuses a
	 * second udpd on its path, both before the interface is touched. */
	ops = (struct vz_stack_ops){ .opaque = &u,
				     .tx = port_tx,
				     .deliver = deliver };
	u.stack = vz_stack_new(&o.stack, &ops, err, sizeof(err));
	if (!u.stack) {
		vz_err("%s", err[0] ? err : strerror(errno));
		return 2;
	}
	u.server = vz_sock_server_new(&o.server, err, sizeof(err));
	if (!u.server) {
		vz_err("%s", err[0] ? err : strerror(errno));
		goto out;
	}
	u.port = vz_udpd_port_open(&pcfg);
	if (!u.port)
		goto out;
	if (o.stack.prefix6_len && vz_udpd_steer6(o.ifname, o.stack.ip6))
		goto out;
	print_ready(&o, &u);
	rc = run(&o, &u) ? 1 : 0;
out:
	vz_udpd_port_close(u.port);
	if (u.server)
		vz_sock_server_free(u.server);
	if (u.stack)
		vz_stack_free(u.stack);
	return rc;
}
