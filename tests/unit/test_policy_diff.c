// SPDX-License-Identifier: BSD-2-Clause
/*
 * One policy code, two builds: the dispatcher (dispatch.c) runs randomised
 * workloads for every policy and worker count while the number of active
 * workers changes, and records each decision policy.h takes with its
 * inputs (hash, flow state, loads, the random draw, buckets). Every record
 * is then replayed through policy.h built natively and built for BPF
 * (policy_replay.bpf.c under BPF_PROG_TEST_RUN), and all three answers --
 * recorded, native replay, BPF -- must be the same worker, event and
 * bucket state. Without root the BPF half is skipped (exit 77).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "check.h"
#include "dispatch/dispatch.h"

#define MAX_RECORDS 40000

struct trace {
	struct vz_policy_record *rec;
	size_t n;
};

static void keep(void *arg, const struct vz_policy_record *rec)
{
	struct trace *t = arg;

	if (t->n < MAX_RECORDS)
		t->rec[t->n++] = *rec;
}

/* FIFO workers serving at random, workers added and parked under load. */
static void record_run(struct trace *t, enum vz_dispatch_policy policy,
		       unsigned int workers, unsigned int gap,
		       unsigned int seed)
{
	enum { QCAP = 1 << 15, FLOWS = 300, STEPS = 60000 };
	static struct vz_dispatch_ticket q[VZ_DISPATCH_MAX_WORKERS][QCAP];
	unsigned int head[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	unsigned int tail[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	struct vz_dispatch_config cfg;
	struct vz_dispatch *d;
	unsigned int w, step;
	__u64 now = 0;

	vz_dispatch_config_default(&cfg, policy, workers);
	cfg.migrate_gap = gap;
	cfg.force_gap = 8; /* deep random queues: forced moves happen too */
	cfg.hold_ns = 20000;
	d = vz_dispatch_new(&cfg);
	if (!d)
		exit(1);
	vz_dispatch_record(d, keep, t);
	srand(seed);
	for (step = 0; step < STEPS; step++) {
		now += 500;
		if (rand() % 3) {
			__u32 hash = (__u32)(rand() % FLOWS) * 2654435761u;
			struct vz_dispatch_ticket tk;

			w = vz_dispatch_pick(d, hash, now, &tk);
			if (tail[w] - head[w] < QCAP)
				q[w][tail[w]++ % QCAP] = tk;
			else
				vz_dispatch_cancel(d, w, &tk);
		} else {
			w = (unsigned int)rand() % workers;
			if (head[w] != tail[w])
				vz_dispatch_done(d, w, &q[w][head[w]++ % QCAP]);
		}
		if (rand() % 1500 == 0)
			vz_dispatch_set_active(d,
					       1 + (unsigned)rand() % workers);
		vz_dispatch_tick(d, now);
	}
	vz_dispatch_free(d);
}

static bool same_answer(const struct vz_policy_record *a,
			const struct vz_policy_record *b)
{
	return a->out_worker == b->out_worker && a->out_event == b->out_event &&
	       a->out_bucket.owner == b->out_bucket.owner &&
	       a->out_bucket.pending == b->out_bucket.pending;
}

/* The inputs alone: a replay that wrote nothing must not pass. */
static struct vz_policy_record question(const struct vz_policy_record *rec)
{
	struct vz_policy_record q = *rec;

	q.out_worker = q.out_event = 0xdeadbeef;
	q.out_bucket.owner = q.out_bucket.pending = 0xdeadbeef;
	return q;
}

static int bpf_replay(int prog, const struct vz_policy_record *rec,
		      struct vz_policy_record *out)
{
	struct vz_policy_record in = question(rec);
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = &in,
		    .data_size_in = sizeof(in), .data_out = out,
		    .data_size_out = sizeof(*out), .repeat = 1);

	if (bpf_prog_test_run_opts(prog, &opts))
		return -errno;
	return opts.retval == XDP_TX ? 0 : -EPROTO;
}

/* What the traces covered, and how many records went through each replay. */
struct tally {
	unsigned long long total, bpf_checked, kinds[2], events[4];
};

/* Every record of one trace, replayed natively and (with prog >= 0) through
 * BPF: both must answer as the recording did. -1 after too many failures. */
static int replay_trace(const struct trace *t, int prog, int policy,
			unsigned int size, struct tally *n)
{
	const char *name = vz_dispatch_policy_name((unsigned)policy);
	struct vz_policy_record native, bpf;
	unsigned int i;
	int ret;

	for (i = 0; i < t->n; i++) {
		native = question(&t->rec[i]);
		vz_policy_replay(&native);
		CHECK(same_answer(&native, &t->rec[i]),
		      "native replay differs: %s on %u, record %u", name, size,
		      i);
		n->kinds[t->rec[i].kind & 1]++;
		n->events[t->rec[i].out_event & 3]++;
		n->total++;
		if (prog < 0)
			continue;
		ret = bpf_replay(prog, &t->rec[i], &bpf);
		CHECK(!ret, "BPF_PROG_TEST_RUN: %s", strerror(-ret));
		CHECK(!ret && same_answer(&bpf, &t->rec[i]),
		      "BPF differs: %s on %u, record %u: "
		      "worker %u vs %u, event %u vs %u",
		      name, size, i, bpf.out_worker, t->rec[i].out_worker,
		      bpf.out_event, t->rec[i].out_event);
		n->bpf_checked++;
		if (failures > 20)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const unsigned int sizes[] = { 2, 8, 16, 64 };
	const char *obj_path = argc > 1 ? argv[1] : "policy_replay.bpf.o";
	struct trace t = { .rec = calloc(MAX_RECORDS, sizeof(*t.rec)) };
	struct tally n = { 0 };
	struct bpf_object *obj = NULL;
	int prog = -1, policy;
	unsigned int s, i, gap;

	if (!t.rec)
		return 1;
	if (geteuid() == 0) {
		obj = bpf_object__open_file(obj_path, NULL);
		if (!obj || bpf_object__load(obj)) {
			fprintf(stderr, "cannot load %s\n", obj_path);
			return 1;
		}
		prog = bpf_program__fd(bpf_object__find_program_by_name(
			obj, "vz_policy_replay_prog"));
	}
	for (policy = 0; policy < VZ_DISPATCH_POLICIES; policy++) {
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			for (gap = 0; gap <= 2; gap += 2) {
				t.n = 0;
				record_run(&t, (enum vz_dispatch_policy)policy,
					   sizes[s], gap, 7 + s + gap);
				CHECK(t.n > 1000, "%s on %u: %zu decisions",
				      vz_dispatch_policy_name((unsigned)policy),
				      sizes[s], t.n);
				if (replay_trace(&t, prog, policy, sizes[s],
						 &n))
					return 1;
			}
		}
	}
	/* The traces must exercise every kind of decision and outcome. */
	CHECK(n.kinds[0] && n.kinds[1], "flow and bucket decisions recorded");
	for (i = 0; i < 4; i++)
		CHECK(n.events[i] > 0, "event %u never happened", i);
	printf("%llu decisions (%llu flow, %llu bucket; stayed %llu, placed "
	       "%llu, moved %llu, forced %llu): native replay identical, "
	       "%llu through BPF identical\n",
	       n.total, n.kinds[0], n.kinds[1], n.events[0], n.events[1],
	       n.events[2], n.events[3], n.bpf_checked);
	bpf_object__close(obj);
	free(t.rec);
	if (failures)
		return 1;
	return prog < 0 ? 77 : 0;
}
