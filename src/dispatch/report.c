// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <string.h>

#include "dispatch/report.h"

void vz_dispatch_report_init(struct vz_dispatch_report *r,
			     enum vz_dispatch_policy policy,
			     unsigned int nworkers)
{
	memset(r, 0, sizeof(*r));
	r->policy = policy;
	r->nworkers = nworkers;
	pthread_mutex_init(&r->lock, NULL);
}

void vz_dispatch_report_destroy(struct vz_dispatch_report *r)
{
	pthread_mutex_destroy(&r->lock);
}

void vz_dispatch_report_publish(struct vz_dispatch_report *r,
				const struct vz_dispatch *policy,
				const struct vz_core_alloc *alloc,
				__u64 ring_full, __u64 active_ns, __u64 ns,
				bool last)
{
	if (last)
		pthread_mutex_lock(&r->lock);
	else if (pthread_mutex_trylock(&r->lock))
		return;
	vz_dispatch_get_stats(policy, &r->snap);
	r->alloc_snap = alloc->stats;
	r->ring_full = ring_full;
	r->active_ns = active_ns;
	r->ns = ns;
	pthread_mutex_unlock(&r->lock);
}

__u64 vz_dispatch_report_ring_full(struct vz_dispatch_report *r)
{
	__u64 n;

	pthread_mutex_lock(&r->lock);
	n = r->ring_full;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* The dispatcher's last snapshot, copied under its lock. */
struct snapshot {
	struct vz_dispatch_stats s;
	struct vz_core_alloc_stats as;
	__u64 active_ns, ns, ring_full;
};

static struct snapshot take(struct vz_dispatch_report *r)
{
	struct snapshot out;

	pthread_mutex_lock(&r->lock);
	out.s = r->snap;
	out.as = r->alloc_snap;
	out.active_ns = r->active_ns;
	out.ns = r->ns;
	out.ring_full = r->ring_full;
	pthread_mutex_unlock(&r->lock);
	return out;
}

static void json_list(FILE *f, const char *key, const __u64 *v,
		      const __u32 *v32, unsigned int n)
{
	unsigned int i;

	fprintf(f, ", \"%s\": [", key);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%llu", i ? ", " : "",
			(unsigned long long)(v ? v[i] : v32[i]));
	fprintf(f, "]");
}

void vz_dispatch_report_json(struct vz_dispatch_report *r, FILE *f)
{
	struct snapshot now = take(r);
	const struct vz_dispatch_stats s = now.s;
	const struct vz_core_alloc_stats as = now.as;
	__u64 ring_full = now.ring_full;
	double mean;

	mean = now.ns ? (double)now.active_ns / (double)now.ns : s.active;
	fprintf(f,
		", \"dispatch\": {\"policy\": \"%s\", \"workers\": %u, "
		"\"active\": %u, \"mean_active\": %.3f, \"frames\": %llu, "
		"\"ring_full\": %llu, \"reordered\": %llu, "
		"\"flows_new\": %llu, \"flows_moved\": %llu, "
		"\"flows_aged\": %llu, \"flows\": %u, "
		"\"buckets_moved\": %llu, \"rebalances\": %llu",
		vz_dispatch_policy_name(r->policy), r->nworkers, s.active, mean,
		(unsigned long long)s.frames, (unsigned long long)ring_full,
		(unsigned long long)s.reordered,
		(unsigned long long)s.flows_new,
		(unsigned long long)s.flows_moved,
		(unsigned long long)s.flows_aged, s.flows,
		(unsigned long long)s.buckets_moved,
		(unsigned long long)s.rebalances);
	json_list(f, "frames_per_worker", s.frames_per_worker, NULL,
		  r->nworkers);
	json_list(f, "in_flight_per_worker", NULL, s.in_flight, r->nworkers);
	if (r->alloc)
		fprintf(f,
			", \"alloc\": {\"mean_active\": %.3f, "
			"\"reallocations\": %llu, \"grows\": %llu, "
			"\"shrinks\": %llu}",
			mean, (unsigned long long)(as.grows + as.shrinks),
			(unsigned long long)as.grows,
			(unsigned long long)as.shrinks);
	fprintf(f, "}");
}

/* The counters of s since base (active and flows stay as they are). */
static struct vz_dispatch_stats since(const struct vz_dispatch_stats *s,
				      const struct vz_dispatch_stats *base,
				      unsigned int nworkers)
{
	struct vz_dispatch_stats d = *s;
	unsigned int i;

	d.frames -= base->frames;
	d.reordered -= base->reordered;
	d.flows_moved -= base->flows_moved;
	d.flows_new -= base->flows_new;
	d.buckets_moved -= base->buckets_moved;
	d.buckets_forced -= base->buckets_forced;
	d.flows_forced -= base->flows_forced;
	for (i = 0; i < nworkers; i++)
		d.frames_per_worker[i] -= base->frames_per_worker[i];
	return d;
}

static void print_json(const struct vz_dispatch_report *r,
		       const struct vz_dispatch_stats *d,
		       const struct vz_core_alloc_stats *as, __u64 ring_full,
		       double mean_active, double t, bool summary)
{
	unsigned int i;

	printf("{\"event\": \"%s\", \"t\": %.3f, \"policy\": \"%s\", "
	       "\"active\": %u, \"workers\": %u, \"mean_active\": "
	       "%.3f, \"frames\": %llu, \"reordered\": %llu, "
	       "\"flows_moved\": %llu, \"flows_new\": %llu, "
	       "\"flows\": %u, \"buckets_moved\": %llu, "
	       "\"buckets_forced\": %llu, \"flows_forced\": %llu, "
	       "\"reallocations\": %llu, \"grows\": %llu, "
	       "\"shrinks\": %llu, \"ring_full\": %llu, "
	       "\"frames_per_worker\": [",
	       summary ? "dispatch_summary" : "dispatch", t,
	       vz_dispatch_policy_name(r->policy), d->active, r->nworkers,
	       mean_active, (unsigned long long)d->frames,
	       (unsigned long long)d->reordered,
	       (unsigned long long)d->flows_moved,
	       (unsigned long long)d->flows_new, d->flows,
	       (unsigned long long)d->buckets_moved,
	       (unsigned long long)d->buckets_forced,
	       (unsigned long long)d->flows_forced,
	       (unsigned long long)(as->grows + as->shrinks),
	       (unsigned long long)as->grows, (unsigned long long)as->shrinks,
	       (unsigned long long)ring_full);
	for (i = 0; i < r->nworkers; i++)
		printf("%s%llu", i ? ", " : "",
		       (unsigned long long)d->frames_per_worker[i]);
	printf("]}\n");
}

static void print_text(const struct vz_dispatch_report *r,
		       const struct vz_dispatch_stats *d,
		       const struct vz_core_alloc_stats *as, double mean_active)
{
	unsigned int i;

	printf("  dispatch %s: %u of %u workers active (mean %.2f), "
	       "%llu reordered, %llu flows moved, %llu buckets moved, "
	       "%llu reallocations; frames per worker:",
	       vz_dispatch_policy_name(r->policy), d->active, r->nworkers,
	       mean_active, (unsigned long long)d->reordered,
	       (unsigned long long)d->flows_moved,
	       (unsigned long long)d->buckets_moved,
	       (unsigned long long)(as->grows + as->shrinks));
	for (i = 0; i < r->nworkers; i++)
		printf(" %llu", (unsigned long long)d->frames_per_worker[i]);
	printf("\n");
}

void vz_dispatch_report_print(struct vz_dispatch_report *r, bool json, double t,
			      bool summary)
{
	struct snapshot now = take(r);
	struct vz_dispatch_stats s = now.s, d, zero = { 0 };
	struct vz_core_alloc_stats as = now.as;
	__u64 active_ns = now.active_ns, ns = now.ns, span,
	      ring_full = now.ring_full;
	double mean_active;

	/* Per interval, except the summary: the whole run. */
	d = since(&s, summary ? &zero : &r->last, r->nworkers);
	span = ns - (summary ? 0 : r->last_ns);
	mean_active =
		span ? (double)(active_ns - (summary ? 0 : r->last_active_ns)) /
				(double)span
		     : s.active;
	if (json)
		print_json(r, &d, &as, ring_full, mean_active, t, summary);
	else
		print_text(r, &d, &as, mean_active);
	fflush(stdout);
	if (!summary) {
		r->last = s;
		r->last_active_ns = active_ns;
		r->last_ns = ns;
	}
}
