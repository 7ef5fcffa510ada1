// SPDX-License-Identifier: BSD-2-Clause
/*
 * veloz-pktgen: UDP throughput, after UDPDK's pktgen. The sender sends
 * numbered datagrams as fast as the stack takes them (or paced to --rate);
 * the sink counts what arrives and, from the numbers, what was lost or
 * reordered on the way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "common/clock.h"

#define PROG "veloz-pktgen"
#define PG_MAX_STREAMS 64
#define PG_BURST 64

struct pg_opts {
	bool sink, json;
	const char *stack;
	struct sockaddr_in bind, peer;
	bool have_bind, have_peer;
	uint64_t size, rate, count, batch;
	double duration;
	int cpu; /* --cpu, -1: not pinned */
};

static const char pg_usage[] =
	"usage: " PROG " --connect IP:PORT [--size N] (--duration S | --count "
	"N)\n"
	"            [--rate PPS] [--bind IP:PORT]\n"
	"       " PROG " --sink --bind IP:PORT --duration S\n"
	"            [--batch N]   (sendmmsg N at a time; unpaced)\n"
	"   both: [--stack veloz|kernel] [--cpu N] [--json]\n";

#define PG_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct pg_opts, member, __VA_ARGS__)

static struct vz_option pg_options[] = {
	PG_OPT("sink", VZ_OPT_FLAG, sink, .help = "count what arrives"),
	VZ_APP_OPTIONS(struct pg_opts),
	/* 0, the default, means unpaced and until --duration */
	PG_OPT("rate", VZ_OPT_U64, rate, .min = 1, .max = 1000000000,
	       .no_default = true, .metavar = "PPS",
	       .help = "datagrams per second"),
	PG_OPT("count", VZ_OPT_U64, count, .min = 1, .max = UINT64_MAX / 2,
	       .no_default = true, .metavar = "N", .help = "datagrams to send"),
	PG_OPT("batch", VZ_OPT_U64, batch, .min = 1, .max = 1024,
	       .metavar = "N", .help = "sendmmsg N at a time"),
	VZ_OPTION_END,
};

static const struct vz_opts pg_opts_table = {
	.prog = PROG,
	.usage = pg_usage,
	.table = pg_options,
};

static void pg_check(const struct pg_opts *o)
{
	if (o->sink) {
		if (!o->have_bind)
			vz_app_usage_error(PROG, "--sink needs --bind IP:PORT");
		if (o->have_peer || o->rate || o->count)
			vz_app_usage_error(PROG, "--connect, --rate and "
						 "--count are for the sender");
		if (o->duration <= 0)
			vz_app_usage_error(PROG, "--sink needs --duration S");
		return;
	}
	if (!o->have_peer)
		vz_app_usage_error(PROG, "give --connect IP:PORT (or --sink; "
					 "--help for usage)");
	if (o->duration <= 0 && !o->count)
		vz_app_usage_error(PROG, "give --duration S or --count N");
	if (o->batch > 1 && o->rate)
		vz_app_usage_error(PROG, "--batch sends unpaced: no --rate");
}

static void pg_parse(int argc, char **argv, struct pg_opts *o)
{
	*o = (struct pg_opts){
		.stack = "veloz", .size = 64, .batch = 1, .cpu = -1
	};
	if (vz_opts_parse(&pg_opts_table, o, argc, argv, NULL))
		exit(2);
	o->have_bind = vz_opts_given(&pg_opts_table, "bind");
	o->have_peer = vz_opts_given(&pg_opts_table, "connect");
	pg_check(o);
}

static int pg_open(const struct pg_opts *o, const struct vz_app_net *net)
{
	return vz_app_open_udp(PROG, net, o->have_bind ? &o->bind : NULL,
			       o->have_peer ? &o->peer : NULL);
}

/*
 * Bytes on an Ethernet wire for one datagram: preamble and gap (20), the
 * frame (14 + FCS 4, 64 at least) around each IPv4 fragment (20 + up to
 * 1480 of the UDP datagram).
 */
static uint64_t pg_wire_bytes(uint64_t size)
{
	uint64_t udp = size + 8, wire = 0;

	while (udp) {
		uint64_t part = udp > 1480 ? 1480 : udp;
		uint64_t frame = 14 + 20 + part + 4;

		wire += 20 + (frame < 64 ? 64 : frame);
		udp -= part;
	}
	return wire;
}

/* ----- sender ----- */

struct pg_tx_counts {
	uint64_t sent, bytes, send_full, refused;
};

/* Until due, without oversleeping much: sleep far off, spin close by. */
static void pg_wait_until(uint64_t due)
{
	uint64_t now = vz_now_ns();
	struct timespec ts;

	if (due > now + 20000) {
		ts.tv_sec = (due - 10000) / 1000000000ull;
		ts.tv_nsec = (due - 10000) % 1000000000ull;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	while (vz_now_ns() < due && !vz_app_stop)
		;
}

/* One datagram: 1 sent, 0 refused for now (counted), -1 fatal. */
static int pg_send_one(int fd, const struct vz_app_net *net, char *buf,
		       const struct pg_opts *o, struct pg_tx_counts *c)
{
	vz_app_set_seq(buf, c->sent);
	if (net->send(fd, buf, o->size, 0) == (ssize_t)o->size) {
		c->sent++;
		c->bytes += o->size;
		return 1;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
	    errno == EINTR) {
		c->send_full++;
		return 0;
	}
	if (errno == ECONNREFUSED) {
		c->refused++; /* an ICMP error for an earlier one */
		return 0;
	}
	vz_app_err(PROG, "send: %s", strerror(errno));
	return -1;
}

/*
 * Up to o->batch datagrams in one sendmmsg (each its own sequence number,
 * so each buffer is its own copy): how many were sent, or -1 fatal.
 */
static int pg_send_batch(int fd, const struct vz_app_net *net, char *bufs,
			 struct mmsghdr *v, struct iovec *iov,
			 const struct pg_opts *o, struct pg_tx_counts *c)
{
	unsigned int n = (unsigned int)o->batch, i;
	int r;

	if (o->count && o->count - c->sent < n)
		n = (unsigned int)(o->count - c->sent);
	for (i = 0; i < n; i++) {
		vz_app_set_seq(bufs + i * o->size, c->sent + i);
		iov[i] = (struct iovec){ bufs + i * o->size, o->size };
		v[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i],
						      .msg_iovlen = 1 } };
	}
	r = net->sendmmsg(fd, v, n, 0);
	if (r > 0) {
		c->sent += (unsigned int)r;
		c->bytes += (unsigned int)r * o->size;
		c->send_full += (unsigned int)r < n;
		return r;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
	    errno == EINTR) {
		c->send_full++;
		return 0;
	}
	if (errno == ECONNREFUSED) {
		c->refused++;
		return 0;
	}
	vz_app_err(PROG, "sendmmsg: %s", strerror(errno));
	return -1;
}

static void pg_tx_report(const struct pg_opts *o, const struct vz_app_net *net,
			 const struct pg_tx_counts *c, double secs)
{
	double pps = secs > 0 ? c->sent / secs : 0;
	double bps = pps * o->size * 8, wire = pps * pg_wire_bytes(o->size) * 8;
	char a[32];

	vz_app_addr_str(&o->peer, a);
	if (!o->json) {
		printf("%llu datagrams of %llu B to %s in %.3f s: %.0f pps, "
		       "%.3f Mbit/s (%.3f on the wire), %llu refused by a "
		       "full stack (%s)\n",
		       (unsigned long long)c->sent, (unsigned long long)o->size,
		       a, secs, pps, bps / 1e6, wire / 1e6,
		       (unsigned long long)c->send_full, net->name);
		return;
	}
	printf("{\"role\": \"sender\", \"stack\": \"%s\", \"connect\": \"%s\", "
	       "\"size\": %llu, \"rate\": %llu, \"sent\": %llu, "
	       "\"bytes\": %llu, \"send_full\": %llu, \"refused\": %llu, "
	       "\"elapsed_s\": %.6f, \"pps\": %.1f, \"bps\": %.1f, "
	       "\"wire_bps\": %.1f}\n",
	       net->name, a, (unsigned long long)o->size,
	       (unsigned long long)o->rate, (unsigned long long)c->sent,
	       (unsigned long long)c->bytes, (unsigned long long)c->send_full,
	       (unsigned long long)c->refused, secs, pps, bps, wire);
}

static int pg_sender(const struct pg_opts *o, const struct vz_app_net *net)
{
	struct vz_app_hdr h = { .magic = VZ_APP_MAGIC_GEN,
				.stream = vz_app_stream_id() };
	struct pg_tx_counts c = { 0 };
	uint64_t start, end = UINT64_MAX, now, tries = 0, i;
	char *buf = malloc(o->size * o->batch);
	struct mmsghdr *v = calloc(o->batch, sizeof(*v));
	struct iovec *iov = calloc(o->batch, sizeof(*iov));
	int fd, err = 0;

	fd = buf && v && iov ? pg_open(o, net) : -1;
	if (fd < 0) {
		free(buf);
		free(v);
		free(iov);
		return 1;
	}
	for (i = 0; i < o->batch; i++)
		vz_app_fill(buf + i * o->size, o->size, &h);
	start = now = vz_now_ns();
	if (o->duration > 0)
		end = start + (uint64_t)(o->duration * 1e9);
	while (!vz_app_stop && now < end && (!o->count || c.sent < o->count)) {
		/* the schedule counts attempts, so a refusal is not retried
		 * at once in a tight loop */
		if (o->rate)
			pg_wait_until(start + tries * 1000000000ull / o->rate);
		tries++;
		if (o->batch > 1
			    ? pg_send_batch(fd, net, buf, v, iov, o, &c) < 0
			    : pg_send_one(fd, net, buf, o, &c) < 0) {
			err = 1;
			break;
		}
		now = vz_now_ns();
	}
	pg_tx_report(o, net, &c, (now - start) / 1e9);
	net->close(fd);
	free(buf);
	free(v);
	free(iov);
	return err;
}

/* ----- sink ----- */

struct pg_stream {
	uint32_t id;
	uint64_t min_seq, next_seq; /* next_seq: the highest seen + 1 */
	uint64_t received, reordered;
};

struct pg_rx_counts {
	uint64_t received, bytes, malformed, untracked;
	uint64_t first_ns, last_ns;
	unsigned int nstreams;
	struct pg_stream streams[PG_MAX_STREAMS];
};

static struct pg_stream *pg_stream(struct pg_rx_counts *c, uint32_t id,
				   uint64_t seq)
{
	struct pg_stream *s;

	for (unsigned int i = 0; i < c->nstreams; i++)
		if (c->streams[i].id == id)
			return &c->streams[i];
	if (c->nstreams == PG_MAX_STREAMS)
		return NULL;
	s = &c->streams[c->nstreams++];
	*s = (struct pg_stream){ .id = id, .min_seq = seq, .next_seq = seq };
	return s;
}

static void pg_count(struct pg_rx_counts *c, const char *buf, ssize_t n)
{
	struct vz_app_hdr h;
	struct pg_stream *s;

	c->last_ns = vz_now_ns();
	if (!c->received++)
		c->first_ns = c->last_ns;
	c->bytes += n;
	if (vz_app_parse_hdr(buf, n, VZ_APP_MAGIC_GEN, &h) < 0) {
		c->malformed++;
		return;
	}
	s = pg_stream(c, h.stream, h.seq);
	if (!s) {
		c->untracked++;
		return;
	}
	s->received++;
	if (h.seq < s->min_seq)
		s->min_seq = h.seq;
	if (h.seq >= s->next_seq)
		s->next_seq = h.seq + 1;
	else
		s->reordered++; /* or a duplicate: both arrive behind */
}

static void pg_rx_report(const struct pg_opts *o, const struct vz_app_net *net,
			 const struct pg_rx_counts *c, const char *bound)
{
	double secs = (c->last_ns - c->first_ns) / 1e9;
	/* n datagrams span n - 1 gaps */
	double pps = secs > 0 ? (c->received - 1) / secs : 0;
	double bps = c->received ? pps * c->bytes * 8 / c->received : 0;
	uint64_t lost = 0, reordered = 0;

	for (unsigned int i = 0; i < c->nstreams; i++) {
		const struct pg_stream *s = &c->streams[i];
		uint64_t span = s->next_seq - s->min_seq;

		lost += span > s->received ? span - s->received : 0;
		reordered += s->reordered;
	}
	if (!o->json) {
		printf("%llu datagrams (%llu B) on %s: %.0f pps, %.3f Mbit/s; "
		       "%llu lost, %llu reordered, %llu malformed (%s)\n",
		       (unsigned long long)c->received,
		       (unsigned long long)c->bytes, bound, pps, bps / 1e6,
		       (unsigned long long)lost, (unsigned long long)reordered,
		       (unsigned long long)c->malformed, net->name);
		return;
	}
	printf("{\"role\": \"sink\", \"stack\": \"%s\", \"bind\": \"%s\", "
	       "\"received\": %llu, \"bytes\": %llu, \"malformed\": %llu, "
	       "\"streams\": %u, \"untracked\": %llu, \"lost\": %llu, "
	       "\"reordered\": %llu, \"elapsed_s\": %.6f, \"pps\": %.1f, "
	       "\"bps\": %.1f}\n",
	       net->name, bound, (unsigned long long)c->received,
	       (unsigned long long)c->bytes, (unsigned long long)c->malformed,
	       c->nstreams, (unsigned long long)c->untracked,
	       (unsigned long long)lost, (unsigned long long)reordered, secs,
	       pps, bps);
}

/* Count what is queued; -1 on a receive error other than "nothing". */
static int pg_drain(int fd, const struct vz_app_net *net, char *buf,
		    struct pg_rx_counts *c)
{
	ssize_t n;

	for (int i = 0; i < PG_BURST; i++) {
		n = net->recv(fd, buf, VZ_APP_MAX_SIZE, MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ||
					       errno == EINTR
				       ? 0
				       : -1;
		pg_count(c, buf, n);
	}
	return 0;
}

static int pg_sink(const struct pg_opts *o, const struct vz_app_net *net)
{
	struct pg_rx_counts *c = calloc(1, sizeof(*c));
	char *buf = malloc(VZ_APP_MAX_SIZE), bound[32] = "";
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	uint64_t end, now;
	int fd = -1, err = 1;

	if (!c || !buf || (fd = pg_open(o, net)) < 0)
		goto out;
	if (net->getsockname(fd, (struct sockaddr *)&me, &len) < 0) {
		vz_app_err(PROG, "getsockname: %s", strerror(errno));
		goto out;
	}
	/* the ready line: a script waits for it and learns the port */
	fprintf(stderr, PROG ": counting on %s for %g s (%s stack)\n",
		vz_app_addr_str(&me, bound), o->duration, net->name);
	fflush(stderr);
	end = vz_now_ns() + (uint64_t)(o->duration * 1e9);
	err = 0;
	while (!vz_app_stop && (now = vz_now_ns()) < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t left_ms = (end - now + 999999) / 1000000;

		if (net->poll(&p, 1, left_ms > 100 ? 100 : (int)left_ms) <= 0)
			continue;
		if (pg_drain(fd, net, buf, c) < 0) {
			vz_app_err(PROG, "receive: %s", strerror(errno));
			err = 1;
			break;
		}
	}
	pg_rx_report(o, net, c, bound);
out:
	if (fd >= 0)
		net->close(fd);
	free(buf);
	free(c);
	return err;
}

int main(int argc, char **argv)
{
	const struct vz_app_net *net;
	struct pg_opts o;
	int code = 1;

	pg_parse(argc, argv, &o);
	vz_app_pin(PROG, o.cpu);
	net = vz_app_stack(PROG, o.stack, &code);
	if (!net)
		return code;
	vz_app_catch_signals();
	return o.sink ? pg_sink(&o, net) : pg_sender(&o, net);
}
