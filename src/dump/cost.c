// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-dump-cost: what veloz dump costs an NF, in ns per packet under
 * BPF_PROG_TEST_RUN, two arms side by side, interleaved trial by trial:
 *   normal  NAME.bpf.o, as veloz runs it when nobody captures: it has no
 *           hook at all, so the capture's cost while off is zero by
 *           construction (BASELINE.bpf.o, if given, is checked to load
 *           to the same instructions: e.g. main's build of the NF);
 *   on      NAME.dump.bpf.o with a capture reading it (events drained
 *           between chunks of runs, outside the timed part).
 * One 64-byte UDP frame, repeated. Prints one JSON object: each arm's
 * median and every trial, and on/normal. Run it under the testbed lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "dump/reader.h"

#define CHUNK 2048 /* runs per call with the capture on: fit its buffer */
#define MAX_TRIALS 1000

struct arm {
	struct bpf_object *obj;
	int fd;
	double ns[MAX_TRIALS];
	__u32 retval;
};

static unsigned long long captured;

static void on_frame(void *ctx, const struct vz_dump_event *ev,
		     const uint8_t *data)
{
	(void)ctx;
	(void)ev;
	(void)data;
	captured++;
}

static int load(struct arm *a, const char *path)
{
	struct bpf_program *p;

	a->obj = bpf_object__open_file(path, NULL);
	if (!a->obj || bpf_object__load(a->obj)) {
		fprintf(stderr, "vz-dump-cost: cannot load %s\n", path);
		return -1;
	}
	p = bpf_object__next_program(a->obj, NULL);
	a->fd = p ? bpf_program__fd(p) : -1;
	return a->fd < 0 ? -1 : 0;
}

/* The verified program: its instruction count and tag. */
static int xlated(int fd, __u32 *insns, __u8 tag[8])
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*insns = info.xlated_prog_len / 8;
	memcpy(tag, info.tag, 8);
	return 0;
}

/* ns per run over n runs, as the kernel times them. */
static double run(struct arm *a, const unsigned char *frame, size_t len,
		  unsigned int n)
{
	unsigned char out[256];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame,
		    .data_size_in = (__u32)len, .data_out = out,
		    .data_size_out = sizeof(out), .repeat = n);

	if (bpf_prog_test_run_opts(a->fd, &o))
		return -1;
	a->retval = o.retval;
	return o.duration;
}

static double run_on(struct arm *a, struct vz_perf_read *r,
		     const unsigned char *frame, size_t len,
		     unsigned int repeat)
{
	unsigned int done, n;
	double ns, sum = 0;

	for (done = 0; done < repeat; done += n) {
		n = repeat - done < CHUNK ? repeat - done : CHUNK;
		ns = run(a, frame, len, n);
		if (ns < 0)
			return ns;
		sum += ns * n;
		vz_perf_poll(r, 0);
	}
	return sum / repeat;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[MAX_TRIALS];

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_arm(const char *name, const struct arm *a, int trials)
{
	int t;

	printf(", \"%s_ns\": %.2f, \"%s_trials\": [", name,
	       median(a->ns, trials), name);
	for (t = 0; t < trials; t++)
		printf("%s%.1f", t ? ", " : "", a->ns[t]);
	printf("]");
}

/* normal and baseline: the same program, instruction for instruction. */
static int print_same_code(struct arm *normal, const char *baseline)
{
	struct arm base = { .fd = -1 };
	__u8 tag_a[8], tag_b[8];
	__u32 na, nb;
	int ret = -1;

	if (xlated(normal->fd, &na, tag_a))
		return -1;
	printf(", \"normal_xlated_insns\": %u", na);
	if (!baseline)
		return 0;
	if (!load(&base, baseline) && !xlated(base.fd, &nb, tag_b)) {
		printf(", \"baseline_xlated_insns\": %u, \"same_tag\": %s", nb,
		       memcmp(tag_a, tag_b, 8) ? "false" : "true");
		ret = 0;
	}
	bpf_object__close(base.obj);
	return ret;
}

static int measure(struct arm arms[2], struct vz_perf_read *r, int trials,
		   unsigned int repeat)
{
	/* Ethernet, IPv4 (198.18.0.1 -> 198.18.1.1), UDP 1000 -> 9, padded */
	static const unsigned char frame[64] = {
		0x02, 0,    0xc6, 0x12, 0xdd, 0x02, 0x02, 0, 0xc6, 0x12, 0xdd,
		0x01, 0x08, 0x00, 0x45, 0,    0,    50,	  0, 1,	   0,	 0,
		64,   17,   0,	  0,	198,  18,   0,	  1, 198,  18,	 1,
		1,    0x03, 0xe8, 0,	9,    0,    30,	  0, 0,
	};
	int t, i, k;
	double ns;

	for (t = 0; t < trials; t++) {
		for (i = 0; i < 2; i++) { /* alternate which runs first */
			k = (t + i) % 2;
			ns = k ? run_on(&arms[1], r, frame, sizeof(frame),
					repeat)
			       : run(&arms[0], frame, sizeof(frame), repeat);
			if (ns < 0) {
				fprintf(stderr, "vz-dump-cost: test run: %s\n",
					strerror(errno));
				return -1;
			}
			arms[k].ns[t] = ns;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct arm arms[2] = { { .fd = -1 }, { .fd = -1 } };
	struct vz_perf_read r = { .drops_fd = -1 };
	unsigned int repeat;
	int trials, ret = 1;
	char err[256];

	if (argc != 5 && argc != 6) {
		fprintf(stderr,
			"usage: vz-dump-cost NAME.bpf.o NAME.dump.bpf.o "
			"REPEAT TRIALS [BASELINE.bpf.o]\n");
		return 2;
	}
	repeat = (unsigned int)strtoul(argv[3], NULL, 10);
	trials = atoi(argv[4]);
	if (repeat < CHUNK || trials < 1 || trials > MAX_TRIALS) {
		fprintf(stderr,
			"vz-dump-cost: REPEAT >= %d, TRIALS in "
			"[1, %d]\n",
			CHUNK, MAX_TRIALS);
		return 2;
	}
	libbpf_set_print(NULL);
	if (load(&arms[0], argv[1]) || load(&arms[1], argv[2]))
		goto out;
	if (vz_perf_open(&r, arms[1].obj, 128, 4u << 20, on_frame, NULL, err,
			 sizeof(err))) {
		fprintf(stderr, "vz-dump-cost: %s\n", err);
		goto out;
	}
	if (measure(arms, &r, trials, repeat))
		goto out;
	vz_perf_poll(&r, 0);
	if (arms[0].retval != arms[1].retval) {
		fprintf(stderr, "vz-dump-cost: the arms disagree on the "
				"verdict\n");
		goto out;
	}
	printf("{\"nf\": \"%s\", \"repeat\": %u, \"trials\": %d, \"action\": "
	       "%u, \"captured\": %llu, \"dropped\": %llu",
	       argv[1], repeat, trials, arms[0].retval, captured,
	       (unsigned long long)(vz_perf_dropped(&r) + r.unpaired));
	if (print_same_code(&arms[0], argc == 6 ? argv[5] : NULL))
		goto out;
	print_arm("normal", &arms[0], trials);
	print_arm("on", &arms[1], trials);
	printf(", \"on_over_normal\": %.3f}\n",
	       median(arms[1].ns, trials) / median(arms[0].ns, trials));
	ret = 0;
out:
	vz_perf_close(&r);
	bpf_object__close(arms[0].obj);
	bpf_object__close(arms[1].obj);
	return ret;
}
