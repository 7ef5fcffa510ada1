// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's workload: the trace every policy sees the same of (one seed).
 * Flows whose hash is the Toeplitz RSS hash of a random 5-tuple, of
 * uniform or Zipf sizes; arrivals Poisson, or on/off bursts of the same
 * mean, at a rate set per step; service times exponential, constant or
 * bimodal.
 */
#include <math.h>
#include <string.h>

#include "dispatch/sim/sim.h"
#include "dispatch/toeplitz.h"

#define BURST_FACTOR 4.0 /* on: 4x the mean rate, 20% of the time */
#define BURST_ON 0.2

/* xoshiro256**, seeded by splitmix64: the same trace for every policy. */
static __u64 splitmix(__u64 *x)
{
	__u64 z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, __u64 seed)
{
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix(&seed);
}

static __u64 rotl(__u64 x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static __u64 rng_next(struct rng *r)
{
	__u64 *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* Uniform in [0, 1). */
static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static double rng_exp(struct rng *r, double mean)
{
	return -log1p(-rng_unit(r)) * mean;
}

static double service_mean_ns(const struct opts *o)
{
	return o->service_us * 1000;
}

static void set_step_rate(struct trace *tr, const struct opts *o)
{
	tr->rate = o->loads[tr->step] * o->cores / service_mean_ns(o);
}

static void next_switch(struct trace *tr, const struct opts *o)
{
	double mean = o->burst_us * 1000;

	/* Bursts last burst_us on average; the gaps make them 20% of time. */
	if (!tr->on)
		mean *= (1 - BURST_ON) / BURST_ON;
	tr->switch_at = tr->t + rng_exp(&tr->rng, mean);
}

void trace_init(struct trace *tr, const struct opts *o)
{
	struct rng flow_rng;
	unsigned int i;
	__u8 tuple[12];

	memset(tr, 0, sizeof(*tr));
	rng_seed(&tr->rng, o->seed);
	rng_seed(&flow_rng, o->seed ^ 0x5eed5eed5eedull);
	tr->flows = o->flows;
	tr->hashes = xrealloc(NULL, o->flows * sizeof(*tr->hashes));
	for (i = 0; i < o->flows; i++) {
		__u64 a = rng_next(&flow_rng), b = rng_next(&flow_rng);

		memcpy(tuple, &a, 8); /* source, destination address */
		memcpy(tuple + 8, &b, 4); /* source, destination port */
		tr->hashes[i] = vz_toeplitz(vz_rss_key, tuple, sizeof(tuple));
	}
	if (o->flow_sizes == FS_HEAVY) {
		double sum = 0;

		tr->cdf = xrealloc(NULL, o->flows * sizeof(*tr->cdf));
		for (i = 0; i < o->flows; i++) {
			sum += pow(i + 1, -o->zipf_s);
			tr->cdf[i] = sum;
		}
		for (i = 0; i < o->flows; i++)
			tr->cdf[i] /= sum;
	}
	tr->step_ns = o->step_ms * 1e6;
	set_step_rate(tr, o);
	if (o->arrivals == ARR_BURSTY) {
		tr->on = rng_unit(&tr->rng) < BURST_ON;
		next_switch(tr, o);
	}
}

/* The next arrival's time in ns, or false when the trace is over. */
bool trace_next(struct trace *tr, const struct opts *o, double *t)
{
	for (;;) {
		double rate = tr->rate, limit, dt;
		bool is_switch;

		if (o->arrivals == ARR_BURSTY)
			rate *= tr->on ? BURST_FACTOR
				       : (1 - BURST_ON * BURST_FACTOR) /
						 (1 - BURST_ON);
		limit = (tr->step + 1) * tr->step_ns;
		is_switch = o->arrivals == ARR_BURSTY && tr->switch_at < limit;
		if (is_switch)
			limit = tr->switch_at;
		dt = rate > 0 ? rng_exp(&tr->rng, 1 / rate) : INFINITY;
		if (tr->t + dt < limit) {
			tr->t += dt;
			*t = tr->t;
			return true;
		}
		/* Memoryless: start afresh at the change of rate. */
		tr->t = limit;
		if (is_switch) {
			tr->on = !tr->on;
			next_switch(tr, o);
			continue;
		}
		if (++tr->step == o->nsteps) {
			tr->over = true;
			return false;
		}
		set_step_rate(tr, o);
	}
}

unsigned int trace_flow(struct trace *tr)
{
	double u;
	unsigned int lo, hi, mid;

	if (!tr->cdf)
		return (unsigned int)(((__u64)(__u32)rng_next(&tr->rng) *
				       tr->flows) >>
				      32);
	u = rng_unit(&tr->rng);
	for (lo = 0, hi = tr->flows - 1; lo < hi;) {
		mid = (lo + hi) / 2;
		if (tr->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

__u64 trace_service(struct trace *tr, const struct opts *o)
{
	double mean = service_mean_ns(o), s;

	switch (o->service) {
	case SVC_CONST:
		s = mean;
		break;
	case SVC_HEAVY: /* 0.9 short + 0.1 * 10 short = mean */
		s = mean / 1.9;
		if (rng_unit(&tr->rng) < 0.1)
			s *= 10;
		break;
	default:
		s = rng_exp(&tr->rng, mean);
	}
	s = round(s);
	return s < 1 ? 1 : (__u64)s;
}
