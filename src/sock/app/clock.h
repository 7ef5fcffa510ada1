/* SPDX-License-Identifier: BSD-2-Clause */
/* libveloz-sock's deadlines: signed CLOCK_MONOTONIC ns of vz_now_ns(), -1
 * for none. */
#ifndef VZ_SOCK_APP_CLOCK_H
#define VZ_SOCK_APP_CLOCK_H

#include "common/clock.h"

/* Milliseconds left to `until` (rounded up) for poll(), at most cap; -1
 * for no deadline (until < 0). */
static inline int vz_ms_left(__s64 until, int cap)
{
	__s64 left;

	if (until < 0)
		return -1;
	left = until - (__s64)vz_now_ns();
	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > cap ? cap : (int)left;
}

#endif
