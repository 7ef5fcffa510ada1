// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's latency histograms: exact below 2 * HIST_SUB ns, then
 * log-linear, HIST_SUB linear sub-buckets per power of two (within 0.4%);
 * mean and max are exact.
 */
#include <math.h>

#include "dispatch/sim/sim.h"

static unsigned int hist_index(__u64 v)
{
	unsigned int e, shift;

	if (v < 2 * HIST_SUB)
		return (unsigned int)v;
	e = 63 - (unsigned int)__builtin_clzll(v); /* >= 9 */
	shift = e - 8;
	return 2 * HIST_SUB + (e - 9) * HIST_SUB +
	       (unsigned int)((v >> shift) - HIST_SUB);
}

/* The middle of bucket i, in ns. */
static double hist_value(unsigned int i)
{
	unsigned int e, shift;
	__u64 lo;

	if (i < 2 * HIST_SUB)
		return i;
	e = (i - 2 * HIST_SUB) / HIST_SUB + 9;
	shift = e - 8;
	lo = ((__u64)(HIST_SUB + (i - 2 * HIST_SUB) % HIST_SUB)) << shift;
	return (double)lo + (double)(1ull << shift) / 2;
}

void hist_add(struct hist *h, __u64 v)
{
	h->count[hist_index(v)]++;
	h->n++;
	h->sum += (double)v;
	if (v > h->max)
		h->max = v;
}

void hist_merge(struct hist *to, const struct hist *from)
{
	unsigned int i;

	for (i = 0; i < HIST_BUCKETS; i++)
		to->count[i] += from->count[i];
	to->n += from->n;
	to->sum += from->sum;
	if (from->max > to->max)
		to->max = from->max;
}

/* The q-quantile (nearest rank), in ns. */
double hist_quantile(const struct hist *h, double q)
{
	__u64 rank, seen = 0;
	unsigned int i;

	if (!h->n)
		return 0;
	rank = (__u64)ceil(q * (double)h->n);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			double v = hist_value(i);

			return v > (double)h->max ? (double)h->max : v;
		}
	}
	return (double)h->max;
}
