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

#endif
