/* SPDX-License-Identifier: BSD-2-Clause */
/* libveloz-sock's one clock: deadlines and spins in CLOCK_MONOTONIC ns. */
#ifndef VZ_SOCK_LIB_CLOCK_H
#define VZ_SOCK_LIB_CLOCK_H

#include <time.h>
#include <linux/types.h>

static inline __s64 vz_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__s64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Milliseconds left to `until` (rounded up) for poll(), at most cap; -1
 * for no deadline (until < 0). */
static inline int vz_ms_left(__s64 until, int cap)
{
	__s64 left;

	if (until < 0)
		return -1;
	left = until - vz_mono_ns();
	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > cap ? cap : (int)left;
}

#endif
