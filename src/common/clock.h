/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one monotonic clock of the tools, runtime, benchmarks and tests:
 * CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads, so that times taken
 * here compare with those an XDP program stamps. Also sleeping until a
 * moment or a signal. (NFs have theirs in veloz/nf.h: vz_time_ns().)
 */
#ifndef VZ_COMMON_CLOCK_H
#define VZ_COMMON_CLOCK_H

#include <signal.h>
#include <time.h>
#include <linux/types.h>

/* Any clock in ns: vz-dump takes CLOCK_REALTIME's offset from it. */
static inline __u64 vz_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static inline __u64 vz_now_ns(void)
{
	return vz_clock_ns(CLOCK_MONOTONIC);
}

static inline double vz_now_s(void)
{
	return (double)vz_now_ns() / 1e9;
}

/* Sleep until vz_now_s() reaches t, or *stop is set. */
static inline void vz_sleep_until(double t, volatile sig_atomic_t *stop)
{
	struct timespec ts;
	double left;

	while (!*stop && (left = t - vz_now_s()) > 0) {
		/* slices: *stop may be set by another thread (the control
		 * socket's "leave"), which no signal interrupts us for */
		if (left > 0.01)
			left = 0.01;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL); /* EINTR on a signal: *stop decides */
	}
}

#endif
