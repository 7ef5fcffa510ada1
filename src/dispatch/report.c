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

void vz_dispatch_report_print(struct vz_dispatch_report *r, bool json, double t,
			      bool summary)
{
	struct vz_dispatch_stats s, zero = { 0 };
	const struct vz_dispatch_stats *base;
	struct vz_core_alloc_stats as;
	__u64 active_ns, ns, span, ring_full;
	double mean_active;
	unsigned int i;

	pthread_mutex_lock(&r->lock);
	s = r->snap;
	as = r->alloc_snap;
	active_ns = r->active_ns;
	ns = r->ns;
	ring_full = r->ring_full;
	pthread_mutex_unlock(&r->lock);
	/* Per interval, except the summary: the whole run. */
	base = summary ? &zero : &r->last;
	span = ns - (summary ? 0 : r->last_ns);
	mean_active =
		span ? (double)(active_ns - (summary ? 0 : r->last_active_ns)) /
				(double)span
		     : s.active;
	if (json) {
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
		       vz_dispatch_policy_name(r->policy), s.active,
		       r->nworkers, mean_active,
		       (unsigned long long)(s.frames - base->frames),
		       (unsigned long long)(s.reordered - base->reordered),
		       (unsigned long long)(s.flows_moved - base->flows_moved),
		       (unsigned long long)(s.flows_new - base->flows_new),
		       s.flows,
		       (unsigned long long)(s.buckets_moved -
					    base->buckets_moved),
		       (unsigned long long)(s.buckets_forced -
					    base->buckets_forced),
		       (unsigned long long)(s.flows_forced -
					    base->flows_forced),
		       (unsigned long long)(as.grows + as.shrinks),
		       (unsigned long long)as.grows,
		       (unsigned long long)as.shrinks,
		       (unsigned long long)ring_full);
		for (i = 0; i < r->nworkers; i++)
			printf("%s%llu", i ? ", " : "",
			       (unsigned long long)(s.frames_per_worker[i] -
						    base->frames_per_worker
							    [i]));
		printf("]}\n");
	} else {
		printf("  dispatch %s: %u of %u workers active (mean %.2f), "
		       "%llu reordered, %llu flows moved, %llu buckets moved, "
		       "%llu reallocations; frames per worker:",
		       vz_dispatch_policy_name(r->policy), s.active,
		       r->nworkers, mean_active,
		       (unsigned long long)(s.reordered - base->reordered),
		       (unsigned long long)(s.flows_moved - base->flows_moved),
		       (unsigned long long)(s.buckets_moved -
					    base->buckets_moved),
		       (unsigned long long)(as.grows + as.shrinks));
		for (i = 0; i < r->nworkers; i++)
			printf(" %llu",
			       (unsigned long long)(s.frames_per_worker[i] -
						    base->frames_per_worker
							    [i]));
		printf("\n");
	}
	fflush(stdout);
	if (!summary) {
		r->last = s;
		r->last_active_ns = active_ns;
		r->last_ns = ns;
	}
}
