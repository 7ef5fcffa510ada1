// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-replay: every packet of a pcap through one build of an NF, the kernel's
 * (BPF_PROG_TEST_RUN on the loaded XDP program) or the native one, with the
 * frames the NF sends (TX, REDIRECT) written to an output pcap in input
 * order. Run it once per backend and compare: that is the differential test.
 *
 * Both backends see a frame the same way: the first VZ_LINEAR_MAX bytes as
 * the linear part, the rest as fragments (the kernel splits test frames so).
 * Frames a real port would never deliver (shorter than an Ethernet header,
 * longer than VZ_FRAME_MAX) do not reach the NF: they get a "drop" record
 * with a reason, identically on both backends.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "cli/common.h"
#include "cli/pcap_io.h"

enum backend { BACKEND_XDP, BACKEND_NATIVE };

struct replay {
	enum backend backend;
	struct vz_nf nf;
	bool json;
	__u64 repeat;		/* 0: no timing run */
	/* xdp */
	int prog_fd;
	int redirects_fd;
	int ncpus;
	struct vz_stat *percpu;	/* scratch for per-CPU reads */
	__u64 redirected[VZ_MAX_PORTS];
	/* totals */
	__u64 packets, sent, by_verdict[VZ_VERDICT_COUNT], skipped;
	__u64 timing_counted[VZ_VERDICT_COUNT]; /* counted by --repeat runs */
	double ns_sum;
};

struct result {
	int verdict;
	int port;		/* redirect port, or -1 */
	__u32 len_out;
	double ns;		/* per-run cost when timed, else 0 */
	const char *skipped;	/* why the NF did not see it, or NULL */
};

static __u8 frame_buf[VZ_HEADROOM + VZ_FRAME_MAX + 64]
	__attribute__((aligned(64)));
static __u8 out_buf[VZ_HEADROOM + VZ_FRAME_MAX + 64];

static void usage(FILE *out)
{
	fprintf(out,
		"usage: vz-replay --bpf NF.bpf.o --native NF.so --backend xdp|native\n"
		"                 --in IN.pcap [--out OUT.pcap] [--set KEY=VALUE]...\n"
		"                 [--json] [--repeat N]\n");
}

/* ---- xdp: BPF_PROG_TEST_RUN ------------------------------------------- */

static int xdp_setup(struct replay *r)
{
	struct bpf_program *prog = vz_nf_program(&r->nf);
	struct bpf_map *ports;
	__u32 port, lo = if_nametoindex("lo");
	cpu_set_t cpus;
	int err;

	if (!prog) {
		vz_err("%s has no XDP program", r->nf.name);
		return -EINVAL;
	}
	err = bpf_object__load(r->nf.obj);
	if (err) {
		if (err == -EPERM)
			vz_err("replay on the xdp backend needs root "
			       "(CAP_BPF and CAP_PERFMON) to load the program");
		else
			vz_err("the kernel refused to load %s: %s (run with "
			       "VELOZ_DEBUG=2 for the verifier log)",
			       r->nf.name, strerror(-err));
		return err;
	}
	r->prog_fd = bpf_program__fd(prog);
	/*
	 * Every port exists in a replay. Test runs never transmit, but
	 * bpf_redirect_map() needs a device in the slot to say REDIRECT;
	 * loopback is one every namespace has.
	 */
	ports = bpf_object__find_map_by_name(r->nf.obj, "vz_ports");
	for (port = 0; ports && port < VZ_MAX_PORTS; port++) {
		err = bpf_map_update_elem(bpf_map__fd(ports), &port, &lo, 0);
		if (err) {
			vz_err("cannot fill the port map: %s", strerror(errno));
			return -errno;
		}
	}
	r->redirects_fd = bpf_map__fd(
		bpf_object__find_map_by_name(r->nf.obj, "vz_redirects"));
	r->ncpus = libbpf_num_possible_cpus();
	r->percpu = calloc((size_t)r->ncpus, sizeof(*r->percpu));
	if (!r->percpu)
		return -ENOMEM;
	/* Stay on one CPU, so per-CPU maps behave as one native worker's. */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu(), &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	return 0;
}

/* Take the per-port totals as they are now (after timing runs). */
static void xdp_refresh_redirected(struct replay *r)
{
	__u32 port;
	int cpu;

	for (port = 0; port < VZ_MAX_PORTS; port++) {
		if (bpf_map_lookup_elem(r->redirects_fd, &port, r->percpu))
			continue;
		for (r->redirected[port] = 0, cpu = 0; cpu < r->ncpus; cpu++)
			r->redirected[port] += r->percpu[cpu].packets;
	}
}

/* Which port's counter moved since the last redirect. */
static int xdp_redirect_port(struct replay *r)
{
	__u32 port;
	__u64 total;
	int cpu;

	for (port = 0; port < VZ_MAX_PORTS; port++) {
		if (bpf_map_lookup_elem(r->redirects_fd, &port, r->percpu))
			continue;
		for (total = 0, cpu = 0; cpu < r->ncpus; cpu++)
			total += r->percpu[cpu].packets;
		if (total != r->redirected[port]) {
			r->redirected[port] = total;
			return (int)port;
		}
	}
	return -1;
}

static int xdp_run(struct replay *r, const __u8 *pkt, __u32 len,
		   struct result *res)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
		    .data_size_in = len, .data_out = out_buf,
		    .data_size_out = sizeof(out_buf), .repeat = 1);
	int err;

	err = bpf_prog_test_run_opts(r->prog_fd, &opts);
	if (err) {
		vz_err("BPF_PROG_TEST_RUN failed on a %u-byte frame: %s", len,
		       strerror(errno));
		return -errno;
	}
	res->verdict = (int)opts.retval;
	res->len_out = opts.data_size_out;
	res->port = res->verdict == VZ_REDIRECT_VERDICT ? xdp_redirect_port(r)
							: -1;
	if (!r->repeat)
		return 0;
	/* The timing run: the kernel's own loop and clock. */
	opts.repeat = (__u32)r->repeat;
	opts.data_out = NULL;
	opts.data_size_out = 0;
	err = bpf_prog_test_run_opts(r->prog_fd, &opts);
	if (err) {
		vz_err("timed BPF_PROG_TEST_RUN failed: %s", strerror(errno));
		return -errno;
	}
	res->ns = opts.duration;
	return 0;
}

/* ---- native ---------------------------------------------------------------- */

static void native_setup(struct replay *r)
{
	struct vz_map *ports = vz_native_map(&r->nf.native, "vz_ports");
	__u32 port, present = 1;

	for (port = 0; ports && port < VZ_MAX_PORTS; port++)
		vz_map_write(ports, &port, &present, 0);
}

static void native_ctx(struct vz_ctx *ctx, const __u8 *pkt, __u32 len)
{
	__u32 linear = len < VZ_LINEAR_MAX ? len : VZ_LINEAR_MAX;

	memset(ctx, 0, sizeof(*ctx));
	memcpy(frame_buf + VZ_HEADROOM, pkt, linear);
	ctx->data_hard_start = frame_buf;
	ctx->data = frame_buf + VZ_HEADROOM;
	ctx->data_end = ctx->data + linear;
	ctx->frags_len = len - linear;
}

static double elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e9 +
	       (double)(b->tv_nsec - a->tv_nsec);
}

static void native_run(struct replay *r, const __u8 *pkt, __u32 len,
		       struct result *res)
{
	struct timespec t0, t1;
	struct vz_ctx ctx;
	__u32 linear;
	__u64 i;

	native_ctx(&ctx, pkt, len);
	res->verdict = vz_native_run(&r->nf.native, &ctx);
	res->port = res->verdict == VZ_REDIRECT_VERDICT ?
			    (int)ctx.redirect_port : -1;
	/* Output: the linear part as the NF left it, then the fragments. */
	linear = (__u32)(ctx.data_end - ctx.data);
	memcpy(out_buf, ctx.data, linear);
	memcpy(out_buf + linear, pkt + (len - ctx.frags_len), ctx.frags_len);
	res->len_out = linear + ctx.frags_len;
	if (!r->repeat)
		return;
	/* Like the kernel's loop: same buffer, no reset between runs. */
	native_ctx(&ctx, pkt, len);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < r->repeat; i++)
		vz_native_run(&r->nf.native, &ctx);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->ns = elapsed_ns(&t0, &t1) / (double)r->repeat;
}

/* ---- output ------------------------------------------------------------------ */

static void print_record(const struct replay *r, __u64 index, __u32 len_in,
			 const struct result *res)
{
	if (!r->json)
		return;
	printf("{\"index\": %llu, \"verdict\": \"%s\", \"len_in\": %u, "
	       "\"len_out\": %u",
	       (unsigned long long)index, vz_verdict_name(res->verdict), len_in,
	       res->len_out);
	if (res->port >= 0)
		printf(", \"port\": %d", res->port);
	if (res->skipped)
		printf(", \"reason\": \"%s\"", res->skipped);
	if (r->repeat && !res->skipped)
		printf(", \"ns\": %.2f", res->ns);
	printf("}\n");
}

/* The NF's own counters (vz_stats), summed over CPUs or workers. */
static int read_nf_stats(struct replay *r, __u64 counted[VZ_VERDICT_COUNT])
{
	struct vz_stat values[VZ_MAX_WORKERS];
	struct vz_map *map;
	__u32 verdict;
	int fd, cpu;

	for (verdict = 0; verdict < VZ_VERDICT_COUNT; verdict++) {
		counted[verdict] = 0;
		if (r->backend == BACKEND_XDP) {
			fd = bpf_map__fd(bpf_object__find_map_by_name(
				r->nf.obj, "vz_stats"));
			if (bpf_map_lookup_elem(fd, &verdict, r->percpu))
				return -errno;
			for (cpu = 0; cpu < r->ncpus; cpu++)
				counted[verdict] += r->percpu[cpu].packets;
		} else {
			map = vz_native_map(&r->nf.native, "vz_stats");
			if (!map || vz_map_read(map, &verdict, values))
				return -ENOENT;
			counted[verdict] += values[0].packets;
		}
	}
	return 0;
}

static int print_summary(struct replay *r, const char *out_path)
{
	__u64 counted[VZ_VERDICT_COUNT];
	int v, err = read_nf_stats(r, counted);

	if (err) {
		vz_err("cannot read the NF's counters: %s", strerror(-err));
		return err;
	}
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		/* runts and oversize frames are dropped before the NF */
		__u64 expect = r->by_verdict[v] + r->timing_counted[v] -
			       (v == VZ_DROP ? r->skipped : 0);

		if (counted[v] != expect) {
			vz_err("counters disagree: the NF counted %llu %s, "
			       "replay saw %llu",
			       (unsigned long long)counted[v],
			       vz_verdict_name(v), (unsigned long long)expect);
			return -EPROTO;
		}
	}
	if (r->json) {
		printf("{\"summary\": true, \"nf\": \"%s\", \"backend\": \"%s\", "
		       "\"packets\": %llu, \"written\": %llu, \"skipped\": %llu",
		       r->nf.name, r->backend == BACKEND_XDP ? "xdp" : "native",
		       (unsigned long long)r->packets,
		       (unsigned long long)r->sent,
		       (unsigned long long)r->skipped);
		for (v = 0; v < VZ_VERDICT_COUNT; v++)
			printf(", \"%s\": %llu", vz_verdict_name(v),
			       (unsigned long long)r->by_verdict[v]);
		if (r->repeat && r->packets > r->skipped)
			printf(", \"repeat\": %llu, \"ns_per_packet\": %.2f",
			       (unsigned long long)r->repeat,
			       r->ns_sum / (double)(r->packets - r->skipped));
		printf("}\n");
		return 0;
	}
	printf("%s on %s: %llu packets:", r->nf.name,
	       r->backend == BACKEND_XDP ? "xdp" : "native",
	       (unsigned long long)r->packets);
	for (v = 1; v <= VZ_VERDICT_COUNT; v++)
		if (r->by_verdict[v % VZ_VERDICT_COUNT])
			printf(" %s %llu", vz_verdict_name(v % VZ_VERDICT_COUNT),
			       (unsigned long long)
				       r->by_verdict[v % VZ_VERDICT_COUNT]);
	if (r->skipped)
		printf(" (%llu never reach a port's NF)",
		       (unsigned long long)r->skipped);
	printf("\n");
	if (out_path)
		printf("wrote %llu packets to %s\n",
		       (unsigned long long)r->sent, out_path);
	if (r->repeat && r->packets > r->skipped)
		printf("cost: %.1f ns per packet (mean over packets, %llu runs "
		       "each)\n",
		       r->ns_sum / (double)(r->packets - r->skipped),
		       (unsigned long long)r->repeat);
	return 0;
}

static int replay_all(struct replay *r, struct vz_pcap_in *in,
		      struct vz_pcap_out *out)
{
	__u64 before[VZ_VERDICT_COUNT], after[VZ_VERDICT_COUNT];
	struct vz_pcap_record rec;
	struct result res;
	char err[256];
	int rc, v;

	while ((rc = vz_pcap_next(in, &rec, err, sizeof(err))) == 1) {
		__u32 len = rec.caplen;

		memset(&res, 0, sizeof(res));
		res.port = -1;
		if (len < ETH_HLEN || len > VZ_FRAME_MAX) {
			res.verdict = VZ_DROP;
			res.skipped = len < ETH_HLEN ? "runt" : "oversize";
			r->skipped++;
		} else {
			if (r->repeat && read_nf_stats(r, before))
				return -EIO;
			if (r->backend == BACKEND_XDP) {
				rc = xdp_run(r, rec.data, len, &res);
				if (rc)
					return rc;
			} else {
				native_run(r, rec.data, len, &res);
			}
			/* The timing runs count too: keep them apart. */
			if (r->repeat) {
				if (read_nf_stats(r, after))
					return -EIO;
				for (v = 0; v < VZ_VERDICT_COUNT; v++)
					r->timing_counted[v] +=
						after[v] - before[v] -
						(v == res.verdict ? 1 : 0);
				if (r->backend == BACKEND_XDP)
					xdp_refresh_redirected(r);
			}
		}
		if (res.verdict < 0 || res.verdict >= VZ_VERDICT_COUNT)
			res.verdict = VZ_ABORTED;
		r->by_verdict[res.verdict]++;
		r->ns_sum += res.ns;
		if (out && !res.skipped &&
		    (res.verdict == VZ_TX || res.verdict == VZ_REDIRECT_VERDICT)) {
			struct vz_pcap_record sent = rec;

			sent.caplen = sent.len = res.len_out;
			sent.data = out_buf;
			vz_pcap_write(out, &sent);
			r->sent++;
		}
		print_record(r, r->packets, len, &res);
		r->packets++;
	}
	if (rc < 0) {
		vz_err("%s", err);
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "bpf", required_argument, NULL, 'b' },
		{ "native", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'k' },
		{ "in", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "set", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *bpf_path = NULL, *native_path = NULL, *backend = NULL;
	const char *in_path = NULL, *out_path = NULL;
	char *sets[VZ_MAX_SETS], errbuf[256];
	struct replay r = { .prog_fd = -1 };
	struct vz_pcap_out *out = NULL;
	struct vz_pcap_in *in;
	int opt, nsets = 0, err = 1;

	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (opt) {
		case 'b': bpf_path = optarg; break;
		case 'n': native_path = optarg; break;
		case 'k': backend = optarg; break;
		case 'i': in_path = optarg; break;
		case 'o': out_path = optarg; break;
		case 'j': r.json = true; break;
		case 's':
			if (nsets == VZ_MAX_SETS) {
				vz_err("at most %d config settings", VZ_MAX_SETS);
				return 2;
			}
			sets[nsets++] = optarg;
			break;
		case 'r':
			if (vz_parse_u64("--repeat", optarg, 1, 100000000,
					 &r.repeat))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!bpf_path || !native_path || !backend || !in_path) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(backend, "xdp")) {
		r.backend = BACKEND_XDP;
	} else if (!strcmp(backend, "native")) {
		r.backend = BACKEND_NATIVE;
	} else {
		vz_err("replay runs on the xdp or native backend, not '%s'",
		       backend);
		return 2;
	}
	in = vz_pcap_open_in(in_path, errbuf, sizeof(errbuf));
	if (!in) {
		vz_err("%s", errbuf);
		return 2;
	}
	if (vz_nf_open(&r.nf, bpf_path, native_path, sets, nsets, 1)) {
		err = 2;	/* a bad NF or config: bad input */
		goto out;
	}
	if (r.backend == BACKEND_XDP) {
		if (xdp_setup(&r))
			goto out;
	} else {
		native_setup(&r);
	}
	if (out_path) {
		out = vz_pcap_open_out(out_path, in, errbuf, sizeof(errbuf));
		if (!out) {
			vz_err("%s", errbuf);
			goto out;
		}
	}
	if (replay_all(&r, in, out)) {
		/* no half-written output that looks like a result */
		vz_pcap_close_out(out);
		out = NULL;
		if (out_path)
			unlink(out_path);
		goto out;
	}
	vz_pcap_close_out(out);
	out = NULL;
	err = print_summary(&r, out_path) ? 1 : 0;
out:
	vz_pcap_close_out(out);
	vz_pcap_close_in(in);
	free(r.percpu);
	if (r.nf.obj)
		vz_nf_close(&r.nf);
	return err;
}
