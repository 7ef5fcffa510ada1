// SPDX-License-Identifier: BSD-2-Clause
/*
 * The XDP stage's allocator (src/dispatch/xdp_alloc.c) on made-up counts,
 * one check a millisecond: it grows when frames counted at one check are
 * still queued at the next, shrinks when the CPUs go idle, writes off what
 * the cpumap dropped (counted sent, never run) so that the lost frames do
 * not look queued for ever, and takes them back if they run after all.
 */
#include <string.h>

#include "check.h"
#include "dispatch/xdp_alloc.h"

#define MS 1000000ull

struct sim {
	struct vz_xdp_alloc a;
	__u64 now;
	__u64 sent[VZ_XDP_ALLOC_MAX_CPUS], run[VZ_XDP_ALLOC_MAX_CPUS];
	unsigned int active;
};

/*
 * One millisecond: `offered` frames spread over the active CPUs, each CPU
 * running at most `rate` of what it holds; returns the active CPUs.
 */
static unsigned int step(struct sim *s, __u64 offered, __u64 rate)
{
	unsigned int c;

	s->now += MS;
	for (c = 0; c < s->active; c++)
		s->sent[c] += offered / s->active;
	for (c = 0; c < s->a.workers; c++) {
		__u64 queued = s->sent[c] - s->run[c];

		s->run[c] += queued < rate ? queued : rate;
	}
	s->active = vz_xdp_alloc_check(&s->a, s->now, s->sent, s->run);
	return s->active;
}

static void start(struct sim *s, unsigned int workers)
{
	memset(s, 0, sizeof(*s));
	s->now = 1000 * MS;
	s->active = 1;
	CHECK(!vz_xdp_alloc_init(&s->a, workers, 1, s->now), "init");
}

static void test_grows_and_shrinks(void)
{
	struct sim s;
	int i;

	start(&s, 4);
	/* light load, served within the millisecond: one CPU is enough */
	for (i = 0; i < 100; i++)
		step(&s, 100, 1000);
	CHECK(s.active == 1, "light load: 1 CPU, not %u", s.active);
	/* 2500 a ms against 1000 per CPU: three CPUs, not four */
	for (i = 0; i < 200; i++)
		step(&s, 2500, 1000);
	CHECK(s.active >= 3, "heavy load: grew to 3, not %u", s.active);
	CHECK(s.a.core.stats.grows >= 2, "grows counted");
	/* silence: back to one */
	for (i = 0; i < 500 && s.active > 1; i++)
		step(&s, 0, 1000);
	CHECK(s.active == 1, "idle: back to 1 CPU, not %u", s.active);
	CHECK(s.a.core.stats.shrinks >= 2, "shrinks counted");
	CHECK(vz_xdp_alloc_written_off(&s.a) == 0, "nothing dropped");
	CHECK(vz_xdp_alloc_mean_active(&s.a) > 1.0 &&
		      vz_xdp_alloc_mean_active(&s.a) < 4.0,
	      "mean active %.2f", vz_xdp_alloc_mean_active(&s.a));
}

static void test_drops_are_written_off(void)
{
	struct sim s;
	int i;

	start(&s, 2);
	/* 500 frames counted sent that the cpumap dropped: never run */
	s.sent[0] += 500;
	for (i = 0; i < 10; i++)
		step(&s, 0, 0);
	CHECK(s.active == 2, "frames that look queued: grew, %u", s.active);
	CHECK(vz_xdp_alloc_written_off(&s.a) == 0, "not written off yet");
	/* ... until the CPU has made no progress for 50 ms */
	for (i = 0; i < 200 && vz_xdp_alloc_written_off(&s.a) < 500; i++)
		step(&s, 0, 0);
	CHECK(vz_xdp_alloc_written_off(&s.a) == 500, "written off: %llu",
	      (unsigned long long)vz_xdp_alloc_written_off(&s.a));
	CHECK(i >= 35 && i <= 45, "written off 50 ms in, not %d ms", i + 10);
	/* and then the CPU is idle, so the allocator can shrink again */
	for (i = 0; i < 100 && s.active > 1; i++)
		step(&s, 0, 0);
	CHECK(s.active == 1, "after the write-off: 1 CPU, not %u", s.active);
	/* a starved CPU, not a drop: they run after all, taken back */
	s.run[0] += 500;
	step(&s, 0, 0);
	CHECK(vz_xdp_alloc_written_off(&s.a) == 0, "taken back: %llu",
	      (unsigned long long)vz_xdp_alloc_written_off(&s.a));
}

static void test_refuses_bad_config(void)
{
	struct vz_xdp_alloc a;

	CHECK(vz_xdp_alloc_init(&a, 0, 1, 0), "0 workers refused");
	CHECK(vz_xdp_alloc_init(&a, 65, 1, 0), "65 workers refused");
	CHECK(vz_xdp_alloc_init(&a, 2, 3, 0), "active > workers refused");
}

int main(void)
{
	test_grows_and_shrinks();
	test_drops_are_written_off();
	test_refuses_bad_config();
	return failures ? 1 : 0;
}
