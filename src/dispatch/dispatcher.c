// SPDX-License-Identifier: BSD-2-Clause
/* The backend-independent part of a userspace dispatcher (dispatcher.h). */
#include <errno.h>

#include "common/clock.h"
#include "dispatch/dispatcher.h"
#include "dispatch/park.h"

int vz_dispatcher_init(struct vz_dispatcher *dc, enum vz_dispatch_policy policy,
		       unsigned int workers, bool alloc)
{
	struct vz_core_alloc_config acfg;
	struct vz_dispatch_config cfg;

	dc->nworkers = workers;
	vz_dispatch_report_init(&dc->report, policy, workers);
	dc->report.alloc = alloc;
	vz_dispatch_config_default(&cfg, policy, workers);
	dc->policy = vz_dispatch_new(&cfg);
	if (!dc->policy)
		return -EINVAL;
	vz_core_alloc_config_default(&acfg, workers);
	if (vz_core_alloc_init(&dc->alloc, &acfg, vz_now_ns()))
		return -EINVAL;
	/* The allocator starts from one worker and grows with the load. */
	if (alloc)
		vz_dispatch_set_active(dc->policy, 1);
	dc->active = vz_dispatch_active(dc->policy);
	return 0;
}

unsigned int vz_dispatcher_allocate(struct vz_dispatcher *dc, __u64 now,
				    const __u64 *oldest)
{
	unsigned int before = dc->active, after;

	after = vz_core_alloc_tick(&dc->alloc, dc->policy, now, oldest);
	if (after != before)
		__atomic_store_n(&dc->active, after, __ATOMIC_RELEASE);
	return before;
}

void vz_dispatcher_publish(struct vz_dispatcher *dc, __u64 now, bool last)
{
	vz_dispatch_report_publish(&dc->report, dc->policy, &dc->alloc,
				   dc->ring_full, dc->active_ns,
				   now - dc->start_ns, last);
}
