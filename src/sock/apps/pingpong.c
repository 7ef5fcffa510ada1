// SPDX-License-Identifier: BSD-2-Clause
/*
 * veloz-pingpong: UDP round-trip latency, after UDPDK's pingpong. The
 * server echoes every datagram; the client sends one, waits for its echo
 * (matched by sequence number, so a late echo is never mistaken for the
 * current one), and reports the distribution of round-trip times.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "common/clock.h"

#define PROG "veloz-pingpong"
#define PP_MAX_COUNT 10000000ull /* RTTs are kept to sort them: 80 MB */

struct pp_opts {
	bool server, client, json, busy;
	const char *stack;
	struct sockaddr_in bind, peer;
	bool have_bind, have_peer;
	uint64_t size, count, warmup, interval_us, timeout_ms;
	double duration; /* server: 0 = until a signal */
	int cpu; /* --cpu, -1: not pinned */
};

struct pp_counts {
	uint64_t sent, received, lost, late, malformed, refused;
	uint64_t warmup_lost;
};

static const char pp_usage[] =
	"usage: " PROG " --server --bind IP:PORT [--duration S] [--count N]\n"
	"       " PROG " --client --connect IP:PORT [--size N] [--count N]\n"
	"            [--interval-us N] [--warmup N] [--timeout-ms N] "
	"[--bind IP:PORT]\n"
	"            [--busy-poll] [--cpu N]\n"
	"   both: [--stack veloz|kernel] [--json]\n";

#define PP_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct pp_opts, member, __VA_ARGS__)

static struct vz_option pp_options[] = {
	PP_OPT("server", VZ_OPT_FLAG, server, .help = "echo what arrives"),
	PP_OPT("client", VZ_OPT_FLAG, client,
	       .help = "send, wait for the echo, time it"),
	VZ_APP_OPTIONS(struct pp_opts),
	PP_OPT("count", VZ_OPT_U64, count, .min = 1, .max = PP_MAX_COUNT,
	       .metavar = "N", .help = "round trips (server: then stop)"),
	PP_OPT("interval-us", VZ_OPT_U64, interval_us, .max = 60000000,
	       .metavar = "N", .help = "pause between round trips"),
	PP_OPT("warmup", VZ_OPT_U64, warmup, .max = PP_MAX_COUNT,
	       .metavar = "N", .help = "round trips not counted first"),
	PP_OPT("timeout-ms", VZ_OPT_U64, timeout_ms, .min = 1, .max = 3600000,
	       .metavar = "N", .help = "wait this long for an echo"),
	PP_OPT("busy-poll", VZ_OPT_FLAG, busy,
	       .help = "spin on the socket, never sleep"),
	VZ_OPTION_END,
};

static const struct vz_opts pp_opts_table = {
	.prog = PROG,
	.usage = pp_usage,
	.table = pp_options,
};

static void pp_check(const struct pp_opts *o, bool count_set)
{
	if (o->server == o->client)
		vz_app_usage_error(PROG, "give one of --server or --client "
					 "(--help for usage)");
	if (o->server && !o->have_bind)
		vz_app_usage_error(PROG, "--server needs --bind IP:PORT");
	if (o->server && o->have_peer)
		vz_app_usage_error(PROG, "--connect is for --client");
	if (o->client && !o->have_peer)
		vz_app_usage_error(PROG, "--client needs --connect IP:PORT");
	if (o->client && o->duration > 0)
		vz_app_usage_error(PROG, "--duration is for --server "
					 "(the client sends --count)");
	if (o->server && count_set && o->count == 0)
		vz_app_usage_error(PROG, "--count must be at least 1");
}

static void pp_parse(int argc, char **argv, struct pp_opts *o)
{
	bool count_set;

	*o = (struct pp_opts){ .stack = "veloz",
			       .size = 64,
			       .count = 1000,
			       .timeout_ms = 1000,
			       .cpu = -1 };
	if (vz_opts_parse(&pp_opts_table, o, argc, argv, NULL))
		exit(2);
	o->have_bind = vz_opts_given(&pp_opts_table, "bind");
	o->have_peer = vz_opts_given(&pp_opts_table, "connect");
	count_set = vz_opts_given(&pp_opts_table, "count");
	if (o->server && !count_set)
		o->count = 0; /* the server echoes until told to stop */
	pp_check(o, count_set);
}

static int pp_open(const struct pp_opts *o, const struct vz_app_net *net)
{
	return vz_app_open_udp(PROG, net, o->have_bind ? &o->bind : NULL,
			       o->have_peer ? &o->peer : NULL);
}

/* ----- server ----- */

struct pp_server_counts {
	uint64_t received, echoed, bytes, send_errors;
};

/* Echo what is queued; -1 on a receive error other than "nothing". */
static int pp_echo_batch(int fd, const struct vz_app_net *net, char *buf,
			 struct pp_server_counts *c, uint64_t limit)
{
	struct sockaddr_in from;
	socklen_t len;
	ssize_t n;

	for (int i = 0; i < 64 && (!limit || c->echoed < limit); i++) {
		len = sizeof(from);
		n = net->recvfrom(fd, buf, VZ_APP_MAX_SIZE, MSG_DONTWAIT,
				  (struct sockaddr *)&from, &len);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ||
					       errno == EINTR ||
					       errno == ECONNREFUSED
				       ? 0
				       : -1;
		c->received++;
		c->bytes += n;
		if (net->sendto(fd, buf, n, 0, (struct sockaddr *)&from, len) ==
		    n)
			c->echoed++;
		else
			c->send_errors++;
	}
	return 0;
}

static int pp_server(const struct pp_opts *o, const struct vz_app_net *net)
{
	struct pp_server_counts c = { 0 };
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	uint64_t end = 0;
	char a[32], *buf;
	int fd, err = 0;

	fd = pp_open(o, net);
	if (fd < 0)
		return 1;
	buf = malloc(VZ_APP_MAX_SIZE);
	if (!buf || net->getsockname(fd, (struct sockaddr *)&me, &len) < 0) {
		vz_app_err(PROG, "setup: %s", strerror(errno));
		net->close(fd);
		free(buf);
		return 1;
	}
	/* the ready line: a script waits for it and learns the port */
	fprintf(stderr, PROG ": echoing on %s (%s stack)\n",
		vz_app_addr_str(&me, a), net->name);
	fflush(stderr);
	if (o->duration > 0)
		end = vz_now_ns() + (uint64_t)(o->duration * 1e9);
	while (!vz_app_stop && (!o->count || c.echoed < o->count) &&
	       (!end || vz_now_ns() < end)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (!o->busy && net->poll(&p, 1, 100) <= 0)
			continue;
		if (pp_echo_batch(fd, net, buf, &c, o->count) < 0) {
			vz_app_err(PROG, "receive: %s", strerror(errno));
			err = 1;
			break;
		}
	}
	net->close(fd);
	free(buf);
	if (o->json)
		printf("{\"role\": \"server\", \"stack\": \"%s\", "
		       "\"bind\": \"%s\", \"received\": %llu, "
		       "\"echoed\": %llu, \"bytes\": %llu, "
		       "\"send_errors\": %llu}\n",
		       net->name, a, (unsigned long long)c.received,
		       (unsigned long long)c.echoed,
		       (unsigned long long)c.bytes,
		       (unsigned long long)c.send_errors);
	else
		printf("%llu datagrams echoed (%llu bytes), %llu send "
		       "errors\n",
		       (unsigned long long)c.echoed,
		       (unsigned long long)c.bytes,
		       (unsigned long long)c.send_errors);
	return err;
}

/* ----- client ----- */

enum pp_wait { PP_ECHO, PP_TIMEOUT, PP_REFUSED, PP_ERROR };

/* Wait (poll) or spin for readable data until the deadline. */
static int pp_readable(int fd, const struct pp_opts *o,
		       const struct vz_app_net *net, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t now = vz_now_ns();
	int r;

	if (now >= deadline)
		return 0;
	if (o->busy)
		return 1; /* the non-blocking receive is the poll */
	r = net->poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
	if (r < 0 && errno != EINTR)
		return -1;
	return r > 0;
}

/* One received datagram against the one we wait for (seq). */
static bool pp_match(const char *buf, ssize_t n, const struct pp_opts *o,
		     uint32_t stream, uint64_t seq, struct pp_counts *c)
{
	struct vz_app_hdr h;

	if ((uint64_t)n != o->size ||
	    vz_app_parse_hdr(buf, n, VZ_APP_MAGIC_PING, &h) < 0 ||
	    h.stream != stream || h.seq > seq) {
		c->malformed++;
		return false;
	}
	if (h.seq < seq) {
		c->late++; /* the echo of one we gave up on */
		return false;
	}
	return true;
}

static enum pp_wait pp_wait_echo(int fd, const struct pp_opts *o,
				 const struct vz_app_net *net, char *buf,
				 uint32_t stream, uint64_t seq,
				 uint64_t deadline, struct pp_counts *c)
{
	ssize_t n;
	int r;

	while (!vz_app_stop) {
		r = pp_readable(fd, o, net, deadline);
		if (r < 0)
			return PP_ERROR;
		if (!r) {
			if (vz_now_ns() >= deadline)
				return PP_TIMEOUT;
			continue;
		}
		n = net->recv(fd, buf, VZ_APP_MAX_SIZE, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == ECONNREFUSED)
				return PP_REFUSED; /* ICMP: nobody listens */
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				return PP_ERROR;
			if (o->busy && vz_now_ns() >= deadline)
				return PP_TIMEOUT;
			continue;
		}
		if (pp_match(buf, n, o, stream, seq, c))
			return PP_ECHO;
	}
	return PP_TIMEOUT;
}

static void pp_sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = t / 1000000000ull,
			       .tv_nsec = t % 1000000000ull };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
		       EINTR &&
	       !vz_app_stop)
		;
}

/* One exchange: 1 echoed (its RTT in *rtt), 0 lost, -1 socket error. */
static int pp_exchange(int fd, const struct pp_opts *o,
		       const struct vz_app_net *net, char *tx, char *rx,
		       uint32_t stream, uint64_t seq, uint64_t *rtt,
		       struct pp_counts *c)
{
	uint64_t t0 = vz_now_ns();
	enum pp_wait w;

	vz_app_set_seq(tx, seq);
	if (net->send(fd, tx, o->size, 0) != (ssize_t)o->size) {
		if (errno != ECONNREFUSED && errno != EAGAIN &&
		    errno != ENOBUFS) {
			vz_app_err(PROG, "send: %s", strerror(errno));
			return -1;
		}
		c->refused += errno == ECONNREFUSED;
		return 0;
	}
	w = pp_wait_echo(fd, o, net, rx, stream, seq,
			 t0 + o->timeout_ms * 1000000ull, c);
	if (w == PP_ERROR) {
		vz_app_err(PROG, "receive: %s", strerror(errno));
		return -1;
	}
	c->refused += w == PP_REFUSED;
	if (w == PP_ECHO)
		*rtt = vz_now_ns() - t0;
	if (o->interval_us)
		pp_sleep_until(t0 + o->interval_us * 1000);
	return w == PP_ECHO;
}

static int pp_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank, in microseconds, of sorted values. */
static double pp_pct(const uint64_t *v, uint64_t n, double p)
{
	uint64_t rank = (uint64_t)ceil(p / 100.0 * n);

	return v[rank ? rank - 1 : 0] / 1000.0;
}

static void pp_report(const struct pp_opts *o, const struct vz_app_net *net,
		      const struct pp_counts *c, uint64_t *rtt, uint64_t n)
{
	double sum = 0, var = 0, mean = 0;
	char a[32];

	qsort(rtt, n, sizeof(*rtt), pp_cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		sum += rtt[i] / 1000.0;
	if (n)
		mean = sum / n;
	for (uint64_t i = 0; i < n; i++)
		var += (rtt[i] / 1000.0 - mean) * (rtt[i] / 1000.0 - mean);
	var = n > 1 ? var / (n - 1) : 0;
	vz_app_addr_str(&o->peer, a);
	if (!o->json) {
		printf("%llu sent, %llu received, %llu lost, %llu late "
		       "(%s stack, %llu B to %s)\n",
		       (unsigned long long)c->sent,
		       (unsigned long long)c->received,
		       (unsigned long long)c->lost, (unsigned long long)c->late,
		       net->name, (unsigned long long)o->size, a);
		if (n)
			printf("rtt us: mean %.3f sd %.3f min %.3f p50 %.3f "
			       "p90 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
			       mean, sqrt(var), rtt[0] / 1000.0,
			       pp_pct(rtt, n, 50), pp_pct(rtt, n, 90),
			       pp_pct(rtt, n, 99), pp_pct(rtt, n, 99.9),
			       rtt[n - 1] / 1000.0);
		return;
	}
	printf("{\"role\": \"client\", \"stack\": \"%s\", \"connect\": "
	       "\"%s\", \"size\": %llu, \"count\": %llu, \"warmup\": %llu, "
	       "\"interval_us\": %llu, \"timeout_ms\": %llu, "
	       "\"busy_poll\": %s, \"sent\": %llu, \"received\": %llu, "
	       "\"lost\": %llu, \"late\": %llu, \"malformed\": %llu, "
	       "\"refused\": %llu, \"warmup_lost\": %llu, \"rtt_us\": ",
	       net->name, a, (unsigned long long)o->size,
	       (unsigned long long)o->count, (unsigned long long)o->warmup,
	       (unsigned long long)o->interval_us,
	       (unsigned long long)o->timeout_ms, o->busy ? "true" : "false",
	       (unsigned long long)c->sent, (unsigned long long)c->received,
	       (unsigned long long)c->lost, (unsigned long long)c->late,
	       (unsigned long long)c->malformed, (unsigned long long)c->refused,
	       (unsigned long long)c->warmup_lost);
	if (!n) {
		printf("null}\n");
		return;
	}
	printf("{\"mean\": %.3f, \"stddev\": %.3f, \"min\": %.3f, "
	       "\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
	       "\"max\": %.3f}}\n",
	       mean, sqrt(var), rtt[0] / 1000.0, pp_pct(rtt, n, 50),
	       pp_pct(rtt, n, 90), pp_pct(rtt, n, 99), pp_pct(rtt, n, 99.9),
	       rtt[n - 1] / 1000.0);
}

static int pp_client(const struct pp_opts *o, const struct vz_app_net *net)
{
	struct pp_counts c = { 0 };
	struct vz_app_hdr h = { .magic = VZ_APP_MAGIC_PING,
				.stream = vz_app_stream_id() };
	uint64_t *rtt = malloc(o->count * sizeof(*rtt));
	char *tx = malloc(o->size), *rx = malloc(VZ_APP_MAX_SIZE);
	uint64_t seq, t = 0;
	int fd = -1, err = 1, r;

	if (!rtt || !tx || !rx) {
		vz_app_err(PROG, "out of memory for %llu samples",
			   (unsigned long long)o->count);
		goto out;
	}
	fd = pp_open(o, net);
	if (fd < 0)
		goto out;
	vz_app_fill(tx, o->size, &h);
	for (seq = 0; seq < o->warmup + o->count && !vz_app_stop; seq++) {
		bool measured = seq >= o->warmup;

		r = pp_exchange(fd, o, net, tx, rx, h.stream, seq, &t, &c);
		if (r < 0)
			goto out;
		c.sent += measured;
		if (r && measured)
			rtt[c.received++] = t;
		else if (!r)
			*(measured ? &c.lost : &c.warmup_lost) += 1;
	}
	pp_report(o, net, &c, rtt, c.received);
	err = 0;
	if (!c.received) {
		vz_app_err(PROG, "no echo came back from %s",
			   vz_app_addr_str(&o->peer, (char[32]){ 0 }));
		err = 1;
	}
out:
	if (fd >= 0)
		net->close(fd);
	free(rtt);
	free(tx);
	free(rx);
	return err;
}

int main(int argc, char **argv)
{
	const struct vz_app_net *net;
	struct pp_opts o;
	int code = 1;

	pp_parse(argc, argv, &o);
	vz_app_pin(PROG, o.cpu);
	net = vz_app_stack(PROG, o.stack, &code);
	if (!net)
		return code;
	vz_app_catch_signals();
	return o.server ? pp_server(&o, net) : pp_client(&o, net);
}
