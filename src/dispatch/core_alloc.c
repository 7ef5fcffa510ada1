// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <string.h>

#include "dispatch/core_alloc.h"

void vz_core_alloc_config_default(struct vz_core_alloc_config *cfg,
				  unsigned int max_workers)
{
	*cfg = (struct vz_core_alloc_config){
		.min_workers = 1,
		.max_workers = max_workers,
		.interval_ns = 5000, /* Shenango's 5 us */
		.grow_delay_ns = 5000,
		.park_idle_ns = 50000,
		.shrink_holdoff_ns = 100000,
	};
}

int vz_core_alloc_init(struct vz_core_alloc *a,
		       const struct vz_core_alloc_config *cfg, __u64 now_ns)
{
	unsigned int w;

	if (cfg->min_workers < 1 || cfg->min_workers > cfg->max_workers ||
	    cfg->max_workers > VZ_DISPATCH_MAX_WORKERS) {
		fprintf(stderr,
			"core allocator: need 1 <= min <= max <= %d "
			"workers\n",
			VZ_DISPATCH_MAX_WORKERS);
		return -1;
	}
	if (!cfg->interval_ns || cfg->park_idle_ns < cfg->interval_ns) {
		fprintf(stderr, "core allocator: the interval must be positive "
				"and no longer than park_idle\n");
		return -1;
	}
	memset(a, 0, sizeof(*a));
	a->cfg = *cfg;
	a->next_check = now_ns;
	for (w = 0; w < VZ_DISPATCH_MAX_WORKERS; w++)
		a->busy_at[w] = now_ns;
	return 0;
}

unsigned int vz_core_alloc_decide(struct vz_core_alloc *a, unsigned int n,
				  __u64 now_ns, const __u32 *in_flight,
				  const __u64 *oldest_enqueue_ns)
{
	bool behind = false, spare = false;
	unsigned int w;

	if (now_ns < a->next_check)
		return n;
	a->next_check = now_ns + a->cfg.interval_ns;
	a->stats.checks++;
	for (w = 0; w < n; w++) {
		__u64 queued = oldest_enqueue_ns[w];

		if (in_flight[w])
			a->busy_at[w] = now_ns;
		else if (now_ns - a->busy_at[w] >= a->cfg.park_idle_ns)
			spare = true;
		if (queued && now_ns - queued >= a->cfg.grow_delay_ns)
			behind = true;
	}
	if (behind && n < a->cfg.max_workers) {
		a->busy_at[n] = now_ns; /* a fresh worker is not idle yet */
		a->stats.grows++;
		a->grown_at = now_ns;
		return n + 1;
	}
	if (!behind && spare && n > a->cfg.min_workers &&
	    (!a->stats.grows ||
	     now_ns - a->grown_at >= a->cfg.shrink_holdoff_ns)) {
		a->stats.shrinks++;
		/* Judge the rest afresh: their load just grew. */
		for (w = 0; w < n - 1; w++)
			a->busy_at[w] = now_ns;
		return n - 1;
	}
	return n;
}

unsigned int vz_core_alloc_tick(struct vz_core_alloc *a, struct vz_dispatch *d,
				__u64 now_ns, const __u64 *oldest_enqueue_ns)
{
	__u32 in_flight[VZ_DISPATCH_MAX_WORKERS];
	unsigned int n = vz_dispatch_active(d), w, after;

	if (now_ns < a->next_check)
		return n;
	for (w = 0; w < n; w++)
		in_flight[w] = vz_dispatch_in_flight(d, w);
	after = vz_core_alloc_decide(a, n, now_ns, in_flight,
				     oldest_enqueue_ns);
	if (after != n)
		vz_dispatch_set_active(d, after);
	return vz_dispatch_active(d);
}
