// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <string.h>

#include "dispatch/xdp_alloc.h"

int vz_xdp_alloc_init(struct vz_xdp_alloc *a, unsigned int workers,
		      unsigned int active, __u64 now_ns)
{
	struct vz_core_alloc_config cfg;
	unsigned int c;

	if (workers < 1 || workers > VZ_XDP_ALLOC_MAX_CPUS || active < 1 ||
	    active > workers) {
		fprintf(stderr,
			"xdp allocator: need 1 <= active <= workers "
			"<= %d\n",
			VZ_XDP_ALLOC_MAX_CPUS);
		return -1;
	}
	memset(a, 0, sizeof(*a));
	vz_core_alloc_config_default(&cfg, workers);
	/*
	 * Checks come every period, give or take the timer: half a period
	 * apart counts as the next one. Behind: a frame the previous check
	 * counted as sent is still queued (Shenango's test). A CPU with
	 * nothing queued or run for 20 checks is one too many.
	 */
	cfg.interval_ns = VZ_XDP_ALLOC_PERIOD_NS / 2;
	cfg.grow_delay_ns = VZ_XDP_ALLOC_PERIOD_NS / 2;
	cfg.park_idle_ns = 20 * VZ_XDP_ALLOC_PERIOD_NS;
	if (vz_core_alloc_init(&a->core, &cfg, now_ns))
		return -1;
	a->workers = workers;
	a->active = active;
	a->start_ns = a->last_ns = now_ns;
	for (c = 0; c < workers; c++)
		a->run_moved_at[c] = now_ns;
	return 0;
}

static const struct vz_xdp_alloc_sample *sample(const struct vz_xdp_alloc *a,
						unsigned int age)
{
	return &a->samples[(a->head + VZ_XDP_ALLOC_HISTORY - age) %
			   VZ_XDP_ALLOC_HISTORY];
}

/*
 * When the oldest frame still queued on CPU c was counted as sent: the
 * oldest check whose count had passed the frames done; 0 when none waits.
 */
static __u64 oldest_waiting(const struct vz_xdp_alloc *a, unsigned int c,
			    __u64 done)
{
	unsigned int age;

	for (age = a->nsamples; age-- > 0;)
		if (sample(a, age)->sent[c] > done)
			return sample(a, age)->t;
	return 0;
}

/* Frames a CPU that stopped making progress will never run: written off. */
static void write_off(struct vz_xdp_alloc *a, unsigned int c, __u64 now_ns,
		      const __u64 *sent, const __u64 *run)
{
	unsigned int age;

	if (run[c] != a->run[c]) {
		a->run[c] = run[c];
		a->run_moved_at[c] = now_ns;
	}
	/* written off too soon (a starved CPU, not drops): take them back */
	if (run[c] + a->lost[c] > sent[c])
		a->lost[c] = sent[c] > run[c] ? sent[c] - run[c] : 0;
	if (now_ns - a->run_moved_at[c] < VZ_XDP_ALLOC_SETTLE_NS)
		return;
	for (age = 0; age < a->nsamples; age++) {
		const struct vz_xdp_alloc_sample *s = sample(a, age);

		if (now_ns - s->t < VZ_XDP_ALLOC_SETTLE_NS)
			continue;
		/* sent before the CPU's last progress, and never run */
		if (s->sent[c] > run[c] + a->lost[c])
			a->lost[c] = s->sent[c] - run[c];
		return;
	}
}

unsigned int vz_xdp_alloc_check(struct vz_xdp_alloc *a, __u64 now_ns,
				const __u64 *sent, const __u64 *run)
{
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	__u32 busy[VZ_DISPATCH_MAX_WORKERS] = { 0 };
	struct vz_xdp_alloc_sample *s;
	unsigned int c;
	__u64 done;

	a->active_ns += (now_ns - a->last_ns) * a->active;
	a->last_ns = now_ns;
	a->head = (a->head + 1) % VZ_XDP_ALLOC_HISTORY;
	if (a->nsamples < VZ_XDP_ALLOC_HISTORY)
		a->nsamples++;
	s = &a->samples[a->head];
	s->t = now_ns;
	for (c = 0; c < a->workers; c++) {
		bool ran = run[c] != a->run[c];

		s->sent[c] = sent[c];
		write_off(a, c, now_ns, sent, run);
		done = run[c] + a->lost[c];
		oldest[c] = oldest_waiting(a, c, done);
		/* queued, or in service since the last check */
		busy[c] = sent[c] > done || ran;
	}
	a->active =
		vz_core_alloc_decide(&a->core, a->active, now_ns, busy, oldest);
	return a->active;
}

double vz_xdp_alloc_mean_active(const struct vz_xdp_alloc *a)
{
	__u64 span = a->last_ns - a->start_ns;

	return span ? (double)a->active_ns / (double)span : a->active;
}

__u64 vz_xdp_alloc_written_off(const struct vz_xdp_alloc *a)
{
	__u64 n = 0;
	unsigned int c;

	for (c = 0; c < a->workers; c++)
		n += a->lost[c];
	return n;
}
