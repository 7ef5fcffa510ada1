/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The median of a bench's trials, shared by vz-lpm-bench and vz-ring-bench:
 * both report medians of interleaved trials, at most BENCH_MAX_TRIALS.
 */
#ifndef VZ_BENCH_STATS_H
#define VZ_BENCH_STATS_H

#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_TRIALS 64

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* v is left as it is: the trials stay in run order for the caller. */
static inline double bench_median(const double *v, int n)
{
	double s[BENCH_MAX_TRIALS];

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), bench_cmp_double);
	return n & 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

#endif
