// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-dump-offcost: what the userspace backends' capture switch costs a
 * frame while nobody captures, natively: bursts of frames through an NF's
 * native build as the afxdp and dpdk workers run them, two arms
 * interleaved trial by trial:
 *   plain  vz_us_process() per frame (the packet path before veloz dump)
 *   off    vz_capture_burst() per burst, vz_us_process_cap() per frame,
 *          the capture off (what the packet path does now)
 * Prints one JSON object: ns per frame, each arm's median and every trial.
 * `--arm plain|off BURSTS` runs one arm alone, for callgrind's exact
 * instruction counts. Run it under the testbed lock: it is a benchmark.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "runner/userspace.h"

#define BURST 32
#define MAX_TRIALS 1000

/* Ethernet, IPv4 (198.18.0.1 -> 198.18.1.1), UDP 1000 -> 9, padded */
static const unsigned char frame[64] = {
	0x02, 0,    0xc6, 0x12, 0xdd, 0x02, 0x02, 0, 0xc6, 0x12, 0xdd,
	0x01, 0x08, 0x00, 0x45, 0,    0,    50,	  0, 1,	   0,	 0,
	64,   17,   0,	  0,	198,  18,   0,	  1, 198,  18,	 1,
	1,    0x03, 0xe8, 0,	9,    0,    30,	  0, 0,
};

static unsigned char bufs[BURST][VZ_HEADROOM + sizeof(frame)];

static struct vz_ctx ctx_of(int i)
{
	unsigned char *start = bufs[i];

	return (struct vz_ctx){ .data = start + VZ_HEADROOM,
				.data_end = start + VZ_HEADROOM + sizeof(frame),
				.data_hard_start = start };
}

static __attribute__((noinline)) void burst_plain(struct vz_us_run *run,
						  struct vz_worker_counters *c)
{
	struct vz_ctx ctx;
	int i;

	for (i = 0; i < BURST; i++) {
		ctx = ctx_of(i);
		vz_us_process(run, &ctx, c);
	}
}

static __attribute__((noinline)) void burst_off(struct vz_us_run *run,
						struct vz_worker_counters *c)
{
	int fd = vz_capture_burst();
	struct vz_ctx ctx;
	int i;

	for (i = 0; i < BURST; i++) {
		ctx = ctx_of(i);
		vz_us_process_cap(run, &ctx, c, fd, 0);
	}
}

static double arm(int off, struct vz_us_run *run, struct vz_worker_counters *c,
		  long bursts)
{
	double t0 = (double)vz_now_ns();
	long b;

	for (b = 0; b < bursts; b++) {
		if (off)
			burst_off(run, c);
		else
			burst_plain(run, c);
	}
	return ((double)vz_now_ns() - t0) / ((double)bursts * BURST);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_trials(const char *name, const double *v, int n)
{
	int t;

	printf(", \"%s_trials\": [", name);
	for (t = 0; t < n; t++)
		printf("%s%.3f", t ? ", " : "", v[t]);
	printf("]");
}

int main(int argc, char **argv)
{
	static double ns[2][MAX_TRIALS], sorted[MAX_TRIALS];
	static struct vz_us_run run;
	struct vz_worker_counters c = { 0 };
	char err[256];
	long bursts;
	int trials, t, i, k;

	if (argc != 4 && !(argc == 5 && !strcmp(argv[2], "--arm"))) {
		fprintf(stderr, "usage: vz-dump-offcost NF.so BURSTS TRIALS\n"
				"       vz-dump-offcost NF.so --arm plain|off "
				"BURSTS\n");
		return 2;
	}
	if (vz_native_open(&run.nf.native, argv[1], 1, err, sizeof(err))) {
		fprintf(stderr, "vz-dump-offcost: %s\n", err);
		return 1;
	}
	run.nports = 1;
	run.ports[0].tap.fd = -1; /* an NF that passes would time write() */
	for (i = 0; i < BURST; i++)
		memcpy(bufs[i] + VZ_HEADROOM, frame, sizeof(frame));
	if (argc == 5) { /* one arm, for callgrind */
		arm(!strcmp(argv[3], "off"), &run, &c, atol(argv[4]));
		return 0;
	}
	bursts = atol(argv[2]);
	trials = atoi(argv[3]);
	if (bursts < 1 || trials < 1 || trials > MAX_TRIALS)
		return 2;
	for (t = 0; t < trials; t++)
		for (i = 0; i < 2; i++) { /* alternate which runs first */
			k = (t + i) % 2;
			ns[k][t] = arm(k, &run, &c, bursts);
		}
	printf("{\"nf\": \"%s\", \"burst\": %d, \"bursts\": %ld, \"trials\": "
	       "%d",
	       argv[1], BURST, bursts, trials);
	print_trials("plain", ns[0], trials);
	print_trials("off", ns[1], trials);
	memcpy(sorted, ns[0], sizeof(double) * (size_t)trials);
	printf(", \"plain_ns\": %.3f", median(sorted, trials));
	memcpy(sorted, ns[1], sizeof(double) * (size_t)trials);
	printf(", \"off_ns\": %.3f}\n", median(sorted, trials));
	vz_native_close(&run.nf.native);
	return 0;
}
