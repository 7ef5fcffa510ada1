// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-replay: every packet of a pcap through one build of an NF, the kernel's
 * (BPF_PROG_TEST_RUN on the loaded XDP program) or the native one, with the
 * frames the NF sends (TX, REDIRECT) written to an output pcap in input
 * order. Run it once per backend and compare: that is the differential test.
 *
 * Frames a real port would never deliver (shorter than an Ethernet header,
 * longer than VZ_FRAME_MAX) do not reach the NF: they get a "drop" record
 * with a reason, identically on both backends. The replay cross-checks its
 * own tally against the NF's counters.
 */
#include <errno.h>
#include <linux/if_ether.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/run_options.h"
#include "tools/offline.h"
#include "tools/pcap_io.h"
#include "ctl/ctl.h"

enum backend { BACKEND_XDP, BACKEND_NATIVE };

struct replay {
	enum backend backend;
	struct vz_nf nf;
	struct vz_offline run;
	bool json;
	__u64 repeat; /* 0: no timing run */
	/* totals */
	__u64 packets, sent, by_verdict[VZ_VERDICT_COUNT], skipped;
	__u64 timing_counted[VZ_VERDICT_COUNT]; /* counted by --repeat runs */
	double ns_sum;
};

struct result {
	int verdict;
	int port; /* redirect port, or -1 */
	__u32 len_out;
	double ns; /* per-run cost when timed, else 0 */
	const char *skipped; /* why the NF did not see it, or NULL */
};

static __u8 out_buf[VZ_OFFLINE_OUT_MAX];

/* ---- output -------------------------------------------------------------- */

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

static int print_summary(struct replay *r, const char *out_path)
{
	__u64 counted[VZ_VERDICT_COUNT];
	int v, err = vz_offline_counts(&r->run, counted);

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
			printf(" %s %llu",
			       vz_verdict_name(v % VZ_VERDICT_COUNT),
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

/* One frame, and with --repeat its timing, kept out of the counter check. */
static int run_one(struct replay *r, const __u8 *pkt, __u32 len,
		   struct result *res)
{
	__u64 before[VZ_VERDICT_COUNT], after[VZ_VERDICT_COUNT];
	struct vz_offline_result out;
	int err, v;

	err = vz_offline_run(&r->run, pkt, len, out_buf, &out);
	if (err)
		return err;
	res->verdict = out.verdict;
	res->port = out.port;
	res->len_out = out.len_out;
	if (!r->repeat)
		return 0;
	if (vz_offline_counts(&r->run, before))
		return -EIO;
	err = vz_offline_time(&r->run, pkt, len, r->repeat, &res->ns);
	if (err)
		return err;
	if (vz_offline_counts(&r->run, after))
		return -EIO;
	for (v = 0; v < VZ_VERDICT_COUNT; v++)
		r->timing_counted[v] += after[v] - before[v];
	return 0;
}

static int replay_all(struct replay *r, struct vz_pcap_in *in,
		      struct vz_pcap_out *out)
{
	struct vz_pcap_record rec;
	struct result res;
	char err[256];
	int rc;

	while ((rc = vz_pcap_next(in, &rec, err, sizeof(err))) == 1) {
		__u32 len = rec.caplen;

		memset(&res, 0, sizeof(res));
		res.port = -1;
		if (len < ETH_HLEN || len > VZ_FRAME_MAX) {
			res.verdict = VZ_DROP;
			res.skipped = len < ETH_HLEN ? "runt" : "oversize";
			r->skipped++;
		} else {
			rc = run_one(r, rec.data, len, &res);
			if (rc)
				return rc;
		}
		if (res.verdict < 0 || res.verdict >= VZ_VERDICT_COUNT)
			res.verdict = VZ_ABORTED;
		r->by_verdict[res.verdict]++;
		r->ns_sum += res.ns;
		if (out && !res.skipped &&
		    (res.verdict == VZ_TX ||
		     res.verdict == VZ_REDIRECT_VERDICT)) {
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

/* ---- options ----------------------------------------------------------- */

struct replay_opts {
	const char *in_path, *out_path, *ops_path;
	int backend; /* enum backend */
	bool json;
	__u64 repeat;
};

static struct vz_nf_args nf_args;

static const char *const backend_names[] = {
	[BACKEND_XDP] = "xdp", [BACKEND_NATIVE] = "native", NULL
};

#define REPLAY_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct replay_opts, member, __VA_ARGS__)

static struct vz_option replay_options[] = {
	VZ_NF_OPTIONS(&nf_args),
	REPLAY_OPT("backend", VZ_OPT_ENUM, backend, .required = true,
		   .choices = backend_names, .no_default = true,
		   .metavar = "xdp|native", .help = "which build runs"),
	REPLAY_OPT("in", VZ_OPT_STRING, in_path, .required = true,
		   .metavar = "IN.pcap", .help = "the frames"),
	REPLAY_OPT("out", VZ_OPT_STRING, out_path, .metavar = "OUT.pcap",
		   .help = "what the NF sends, in input order"),
	REPLAY_OPT("json", VZ_OPT_FLAG, json, .help = "JSON lines"),
	REPLAY_OPT("repeat", VZ_OPT_U64, repeat, .min = 1, .max = 100000000,
		   .no_default = true, .metavar = "N",
		   .help = "time each packet over N runs"),
	REPLAY_OPT("ops", VZ_OPT_STRING, ops_path, .metavar = "FILE",
		   .help = "control operations applied first"),
	VZ_OPTION_END,
};

static const struct vz_opts replay_opts = {
	.prog = "vz-replay",
	.usage = "usage: vz-replay --bpf NF.bpf.o --native NF.so "
		 "--backend xdp|native\n"
		 "                 --in IN.pcap [--out OUT.pcap] "
		 "[--set KEY=VALUE]...\n"
		 "                 [--ops FILE] [--json] [--repeat N]\n",
	.table = replay_options,
};

static int parse_args(struct replay_opts *o, int argc, char **argv)
{
	if (vz_opts_parse(&replay_opts, o, argc, argv, NULL))
		return 2;
	/* opening --out truncates it: refuse it when it is an input */
	if (o->out_path && vz_same_file(o->out_path, o->in_path)) {
		vz_err("--out %s is the same file as --in %s", o->out_path,
		       o->in_path);
		return 2;
	}
	if (o->out_path && o->ops_path &&
	    vz_same_file(o->out_path, o->ops_path)) {
		vz_err("--out %s is the same file as --ops %s", o->out_path,
		       o->ops_path);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct replay_opts o = { .backend = -1 };
	const char *in_path, *out_path, *ops_path;
	char errbuf[512];
	struct vz_ctl ctl;
	struct replay r = { 0 };
	struct vz_pcap_out *out = NULL;
	struct vz_pcap_in *in;
	int err = 1, failed;
	struct stat st;

	vz_check_stdout_at_exit();
	if (parse_args(&o, argc, argv))
		return 2;
	in_path = o.in_path;
	out_path = o.out_path;
	ops_path = o.ops_path;
	r.backend = (enum backend)o.backend;
	r.json = o.json;
	r.repeat = o.repeat;
	in = vz_pcap_open_in(in_path, errbuf, sizeof(errbuf));
	if (!in) {
		vz_err("%s", errbuf);
		return 2;
	}
	if (vz_nf_open(&r.nf, nf_args.bpf_path, nf_args.native_path,
		       nf_args.sets.v, nf_args.sets.n, 1)) {
		err = 2; /* a bad NF or config: bad input */
		goto out;
	}
	if (vz_offline_open(&r.run, &r.nf, r.backend == BACKEND_XDP, r.repeat))
		goto out;
	if (ops_path) {
		if (r.backend == BACKEND_XDP)
			vz_ctl_init_bpf(&ctl, r.nf.obj, r.nf.name, "xdp");
		else
			vz_ctl_init_native(&ctl, &r.nf.native, "native");
		if (vz_ctl_apply_file(&ctl, ops_path, errbuf, sizeof(errbuf))) {
			vz_err("%s", errbuf);
			err = 2;
			goto out;
		}
	}
	if (out_path) {
		out = vz_pcap_open_out(out_path, in, errbuf, sizeof(errbuf));
		if (!out) {
			vz_err("%s", errbuf);
			goto out;
		}
	}
	failed = replay_all(&r, in, out);
	if (!failed && out && vz_pcap_finish_out(out, errbuf, sizeof(errbuf))) {
		vz_err("--out %s: %s", out_path, errbuf);
		failed = -EIO;
	}
	if (failed) {
		/* no half-written output that looks like a result; but only a
		 * file: unlinking --out /dev/full would remove the device */
		vz_pcap_close_out(out);
		out = NULL;
		if (out_path && !stat(out_path, &st) && S_ISREG(st.st_mode))
			unlink(out_path);
		goto out;
	}
	vz_pcap_close_out(out);
	out = NULL;
	err = print_summary(&r, out_path) ? 1 : 0;
out:
	vz_pcap_close_out(out);
	vz_pcap_close_in(in);
	vz_offline_close(&r.run);
	if (r.nf.obj)
		vz_nf_close(&r.nf);
	return err;
}
