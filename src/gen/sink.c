// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sink: counts the generator's frames where they arrive, in XDP (see
 * sink.bpf.c), and drops them. Prints one JSON line when attached, and at
 * the end (SIGINT, SIGTERM or --duration) what arrived: frames, duplicates,
 * reordered frames and one-way latency percentiles from an HDR-style
 * histogram, which is printed too so that trials can be merged.
 *
 * The testbed's far ends carry a placeholder XDP_PASS program (vz_tb_rx);
 * the sink takes its place for the run and puts it back afterwards. Any
 * other program on the interface is refused, except a veloz program left by
 * a killed run, which --replace removes.
 */
#include <errno.h>
#include <linux/if_link.h>
#include <math.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/err.h"
#include "common/options.h"
#include "common/parse.h"
#include "gen/bpf_object.h"
#include "gen/sink.h"
#include "common/clock.h"
#include "runner/xdp_attach.h"
#include "common/iface.h"

#define SINK_DEFAULT_PORT 9 /* the generator's: discard */

struct sink {
	const char *ifname;
	int ifindex;
	double duration; /* 0 = until a signal */
	__u16 port;
	bool json, generic, replace, count_only;
	const char *bpf_path;
};

struct totals {
	struct vz_sink_stats st;
	__u64 hist[VZ_SINK_BUCKETS];
	__u64 counted; /* frames in the histogram */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* The lowest latency bucket i holds (see sink.h). */
static __u64 bucket_low(__u32 i)
{
	__u32 j, msb;

	if (i < VZ_SINK_EXACT)
		return i;
	j = i - VZ_SINK_EXACT;
	msb = 6 + j / VZ_SINK_SUB;
	return (__u64)(VZ_SINK_SUB + j % VZ_SINK_SUB)
	       << (msb - VZ_SINK_SUB_BITS);
}

static const char sink_usage[] =
	"usage: vz-sink --iface IF [--duration S] [--port N] "
	"[--generic] [--replace] [--count-only] [--json]\n"
	"               [--bpf sink.bpf.o]\n";

#define SINK_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct sink, member, __VA_ARGS__)

static struct vz_option sink_options[] = {
	SINK_OPT("iface", VZ_OPT_IFNAME, ifname, .required = true,
		 .metavar = "IF", .help = "count what arrives here"),
	SINK_OPT("duration", VZ_OPT_SECONDS, duration, .no_default = true,
		 .metavar = "S",
		 .help = "stop after S seconds (default: at a "
			 "signal)"),
	SINK_OPT("port", VZ_OPT_U64, port, .min = 1, .max = 65535,
		 .metavar = "N", .help = "the UDP port counted"),
	SINK_OPT("generic", VZ_OPT_FLAG, generic, .help = "generic XDP"),
	SINK_OPT("replace", VZ_OPT_FLAG, replace,
		 .help = "remove a stale veloz program first"),
	SINK_OPT("count-only", VZ_OPT_FLAG, count_only,
		 .help = "count, without latency or sequence checks"),
	SINK_OPT("json", VZ_OPT_FLAG, json, .help = "the result as JSON"),
	SINK_OPT("bpf", VZ_OPT_STRING, bpf_path, .metavar = "PATH",
		 .help = "sink.bpf.o (default: beside this program)"),
	VZ_OPTION_END,
};

static const struct vz_opts sink_opts = {
	.prog = "vz-sink",
	.usage = sink_usage,
	.table = sink_options,
};

static int parse_args(struct sink *s, int argc, char **argv)
{
	if (vz_opts_parse(&sink_opts, s, argc, argv, NULL))
		return 2;
	s->ifindex = (int)if_nametoindex(s->ifname);
	if (!s->ifindex) {
		vz_err("no interface '%s' in this network namespace",
		       s->ifname);
		return 2;
	}
	return 0;
}

/*
 * What is on the interface now: nothing, the testbed's placeholder (its fd
 * in *placeholder_fd, to put back later), or a stale veloz program that
 * --replace removes. Anything else is someone's, and refused.
 */
static int clear_the_way(const struct sink *s, int *placeholder_fd)
{
	struct vz_xdp_attached now;

	*placeholder_fd = -1;
	if (vz_xdp_query(s->ifindex, &now) || !now.any)
		return 0;
	if (!strcmp(now.names, VZ_TESTBED_RX_PROG)) {
		*placeholder_fd = bpf_prog_get_fd_by_id(now.prog_id);
		return 0;
	}
	if (!now.ours) {
		vz_err("%s already runs XDP (%s); the sink will not replace it",
		       s->ifname, now.names);
		return 1;
	}
	if (!s->replace) {
		vz_err("stale veloz program on %s (%s), left by a run that was "
		       "killed; --replace removes it",
		       s->ifname, now.names);
		return 1;
	}
	vz_xdp_detach_all(s->ifindex);
	return 0;
}

static int load(const struct sink *s, struct bpf_object **obj)
{
	struct vz_sink_config cfg = { .dst_port = htons(s->port),
				      .count_only = s->count_only };

	return vz_load_with_config(s->bpf_path, "sink", ".rodata", &cfg,
				   sizeof(cfg), obj);
}

static int read_totals(struct bpf_object *obj, struct totals *t)
{
	int ncpu = libbpf_num_possible_cpus(), cpu, err = 0;
	struct vz_sink_stats *per_cpu = calloc((size_t)ncpu, sizeof(*per_cpu));
	__u64 *counts = calloc((size_t)ncpu, sizeof(*counts));
	int stats_fd = bpf_object__find_map_fd_by_name(obj, "vz_sink_stats");
	int hist_fd = bpf_object__find_map_fd_by_name(obj, "vz_sink_hist");
	__u32 key = 0, i;

	memset(t, 0, sizeof(*t));
	if (!per_cpu || !counts ||
	    bpf_map_lookup_elem(stats_fd, &key, per_cpu)) {
		err = -1;
		goto out;
	}
	for (cpu = 0; cpu < ncpu; cpu++) {
		struct vz_sink_stats *c = &per_cpu[cpu];

		t->st.packets += c->packets;
		t->st.bytes += c->bytes;
		t->st.duplicates += c->duplicates;
		t->st.reordered += c->reordered;
		t->st.latency_sum_ns += c->latency_sum_ns;
		t->st.future += c->future;
		t->st.other += c->other;
		if (c->latency_max_ns > t->st.latency_max_ns)
			t->st.latency_max_ns = c->latency_max_ns;
		if (c->latency_min_ns &&
		    (!t->st.latency_min_ns ||
		     c->latency_min_ns < t->st.latency_min_ns))
			t->st.latency_min_ns = c->latency_min_ns;
	}
	for (i = 0; i < VZ_SINK_BUCKETS; i++) {
		if (bpf_map_lookup_elem(hist_fd, &i, counts)) {
			err = -1;
			goto out;
		}
		for (cpu = 0; cpu < ncpu; cpu++)
			t->hist[i] += counts[cpu];
		t->counted += t->hist[i];
	}
out:
	free(per_cpu);
	free(counts);
	return err;
}

/* The latency below which a fraction q of frames fell (HDR style: the
 * highest value of the bucket that holds it, within the seen min and max). */
static __u64 percentile(const struct totals *t, double q)
{
	__u64 want = (__u64)ceil(q * (double)t->counted), seen = 0, v;
	__u32 i;

	if (!t->counted)
		return 0;
	if (want < 1)
		want = 1;
	for (i = 0; i < VZ_SINK_BUCKETS; i++) {
		seen += t->hist[i];
		if (seen >= want) {
			v = i + 1 < VZ_SINK_BUCKETS ? bucket_low(i + 1) - 1
						    : t->st.latency_max_ns;
			if (v > t->st.latency_max_ns)
				v = t->st.latency_max_ns;
			if (v < t->st.latency_min_ns)
				v = t->st.latency_min_ns;
			return v;
		}
	}
	return t->st.latency_max_ns;
}

/* Standard deviation from the histogram's bucket midpoints. */
static double stddev(const struct totals *t)
{
	double mean, sum = 0, mid;
	__u32 i;

	if (t->counted < 2)
		return 0;
	mean = (double)t->st.latency_sum_ns / (double)t->counted;
	for (i = 0; i < VZ_SINK_BUCKETS; i++) {
		if (!t->hist[i])
			continue;
		mid = i + 1 < VZ_SINK_BUCKETS ? ((double)bucket_low(i) +
						 (double)bucket_low(i + 1) -
						 1) / 2
					      : (double)bucket_low(i);
		sum += (double)t->hist[i] * (mid - mean) * (mid - mean);
	}
	return sqrt(sum / (double)(t->counted - 1));
}

static void report(const struct sink *s, const struct totals *t, double secs)
{
	__u64 unique = t->st.packets - t->st.duplicates;
	double mean =
		t->counted ? (double)t->st.latency_sum_ns / (double)t->counted
			   : 0;
	static const double qs[] = { 0.5, 0.9, 0.99, 0.999 };
	static const char *const qnames[] = { "p50", "p90", "p99", "p999" };
	bool first = true;
	__u32 i;

	if (!s->json) {
		printf("received %llu generator frames on %s in %.2f s "
		       "(%.0f pps): %llu duplicates, %llu reordered\n",
		       (unsigned long long)t->st.packets, s->ifname, secs,
		       secs > 0 ? (double)t->st.packets / secs : 0,
		       (unsigned long long)t->st.duplicates,
		       (unsigned long long)t->st.reordered);
		if (t->counted)
			printf("one-way latency (ns): min %llu, p50 %llu, p90 "
			       "%llu, p99 %llu, p99.9 %llu, max %llu, mean "
			       "%.0f, stddev %.0f\n",
			       (unsigned long long)t->st.latency_min_ns,
			       (unsigned long long)percentile(t, 0.5),
			       (unsigned long long)percentile(t, 0.9),
			       (unsigned long long)percentile(t, 0.99),
			       (unsigned long long)percentile(t, 0.999),
			       (unsigned long long)t->st.latency_max_ns, mean,
			       stddev(t));
		return;
	}
	printf("{\"summary\": true, \"iface\": \"%s\", \"seconds\": %.6f, "
	       "\"received\": %llu, \"unique\": %llu, \"duplicates\": %llu, "
	       "\"reordered\": %llu, \"bytes\": %llu, \"other\": %llu, "
	       "\"clock_ahead\": %llu, \"latency_ns\": {\"count\": %llu, "
	       "\"min\": %llu, \"mean\": %.1f, \"stddev\": %.1f, \"max\": %llu",
	       s->ifname, secs, (unsigned long long)t->st.packets,
	       (unsigned long long)unique, (unsigned long long)t->st.duplicates,
	       (unsigned long long)t->st.reordered,
	       (unsigned long long)t->st.bytes, (unsigned long long)t->st.other,
	       (unsigned long long)t->st.future, (unsigned long long)t->counted,
	       (unsigned long long)t->st.latency_min_ns, mean, stddev(t),
	       (unsigned long long)t->st.latency_max_ns);
	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		printf(", \"%s\": %llu", qnames[i],
		       (unsigned long long)percentile(t, qs[i]));
	/* [bucket's lowest ns, frames] for every bucket that has any */
	printf("}, \"histogram\": [");
	for (i = 0; i < VZ_SINK_BUCKETS; i++) {
		if (!t->hist[i])
			continue;
		printf("%s[%llu, %llu]", first ? "" : ", ",
		       (unsigned long long)bucket_low(i),
		       (unsigned long long)t->hist[i]);
		first = false;
	}
	printf("]}\n");
}

/*
 * Attach the sink in place of the testbed's placeholder that clear_the_way()
 * found (atomically: XDP_FLAGS_REPLACE), or where there is no program. 0,
 * or -1 said.
 */
static int attach(struct sink *s, int prog_fd, int placeholder_fd, __u32 mode)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = placeholder_fd);
	int err;

	err = bpf_xdp_attach(s->ifindex, prog_fd,
			     mode | (placeholder_fd >= 0
					     ? XDP_FLAGS_REPLACE
					     : XDP_FLAGS_UPDATE_IF_NOEXIST),
			     &opts);
	if (err) {
		vz_err("cannot attach the sink to %s: %s", s->ifname,
		       strerror(-err));
		return -1;
	}
	return 0;
}

/* Back to what was there: the placeholder, or nothing. */
static void detach(struct sink *s, int prog_fd, int placeholder_fd, __u32 mode)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd);

	if (placeholder_fd >= 0)
		bpf_xdp_attach(s->ifindex, placeholder_fd,
			       mode | XDP_FLAGS_REPLACE, &opts);
	else
		bpf_xdp_detach(s->ifindex, mode | XDP_FLAGS_REPLACE, &opts);
}

/* Say the sink counts, then wait for --duration or a signal: seconds. */
static double count(struct sink *s)
{
	struct sigaction sa = { .sa_handler = on_signal };
	double start;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (s->json)
		printf("{\"attached\": \"%s\", \"mode\": \"%s\"}\n", s->ifname,
		       s->generic ? "generic" : "native");
	else
		fprintf(stderr, "sink on %s: counting (Ctrl-C to stop)\n",
			s->ifname);
	fflush(stdout);
	start = vz_now_s();
	if (s->duration > 0)
		vz_sleep_until(start + s->duration, &stop_signal);
	else
		while (!stop_signal)
			pause();
	return vz_now_s() - start;
}

int main(int argc, char **argv)
{
	struct sink s = { .port = SINK_DEFAULT_PORT };
	struct vz_iface_lock lock = { .fd = -1 };
	struct bpf_object *obj = NULL;
	struct totals *t = NULL;
	char bpf_path[4096], msg[256];
	int prog_fd, placeholder_fd = -1, ret = 1;
	__u32 mode;
	double secs;

	vz_check_stdout_at_exit(); /* a result that never reached stdout fails
				    */
	ret = parse_args(&s, argc, argv);
	if (ret)
		return ret;
	ret = 1;
	if (!s.bpf_path) {
		vz_beside_executable("sink.bpf.o", bpf_path, sizeof(bpf_path));
		s.bpf_path = bpf_path;
	}
	if (!vz_xdp_privileged()) {
		vz_err("the sink needs root (CAP_BPF, CAP_NET_ADMIN)");
		return 1;
	}
	if (vz_iface_lock(&lock, s.ifindex, s.ifname, msg, sizeof(msg))) {
		vz_err("%s", msg);
		return 1;
	}
	t = calloc(1, sizeof(*t));
	if (!t || clear_the_way(&s, &placeholder_fd))
		goto out;
	prog_fd = load(&s, &obj);
	if (prog_fd < 0)
		goto out;
	mode = s.generic ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	if (attach(&s, prog_fd, placeholder_fd, mode))
		goto out;
	secs = count(&s);
	detach(&s, prog_fd, placeholder_fd, mode);
	if (read_totals(obj, t)) {
		vz_err("cannot read the sink's counters");
		goto out;
	}
	report(&s, t, secs);
	ret = 0;
out:
	if (placeholder_fd >= 0)
		close(placeholder_fd);
	bpf_object__close(obj);
	vz_iface_unlock(&lock);
	free(t);
	return ret;
}
