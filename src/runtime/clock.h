/* SPDX-License-Identifier: BSD-2-Clause */
/* Monotonic time in seconds, and sleeping until a moment or a signal. */
#ifndef VZ_RUNTIME_CLOCK_H
#define VZ_RUNTIME_CLOCK_H

#include <signal.h>
#include <time.h>

static inline double vz_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep until vz_now_s() reaches t, or *stop is set by a signal handler. */
static inline void vz_sleep_until(double t, volatile sig_atomic_t *stop)
{
	struct timespec ts;
	double left;

	while (!*stop && (left = t - vz_now_s()) > 0) {
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL); /* EINTR on a signal: *stop decides */
	}
}

#endif
