// SPDX-License-Identifier: BSD-2-Clause
/*
 * Busy polling and CPU pinning for libveloz-sock (busy.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock/lib/busy.h"
#include "sock/lib/clock.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static __u32 env_us;

static void env_read(void)
{
	const char *v = getenv("VZ_BUSY_POLL_US");
	char *end;
	long n;

	if (!v || !*v)
		return;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < 0 || n > (long)VZ_BUSY_POLL_MAX_US) {
		fprintf(stderr,
			"libveloz-sock: VZ_BUSY_POLL_US=%s is not a number of "
			"microseconds in 0..%u; busy polling is off\n",
			v, VZ_BUSY_POLL_MAX_US);
		return;
	}
	env_us = (__u32)n;
}

__u32 vz_busy_default_us(void)
{
	pthread_once(&env_once, env_read);
	return env_us;
}

static pthread_once_t pin_once = PTHREAD_ONCE_INIT;

static void pin(void)
{
	const char *v = getenv("VZ_CPU");
	cpu_set_t set;
	char *end;
	long n;

	if (!v || !*v)
		return;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < 0 || n >= CPU_SETSIZE) {
		fprintf(stderr,
			"libveloz-sock: VZ_CPU=%s is not a CPU number; "
			"not pinned\n",
			v);
		return;
	}
	CPU_ZERO(&set);
	CPU_SET((int)n, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "libveloz-sock: VZ_CPU=%s: %s; not pinned\n", v,
			strerror(errno));
}

void vz_busy_pin_from_env(void)
{
	pthread_once(&pin_once, pin);
}

/*
 * A spinner offers its CPU this often. What it waits for often needs that
 * very CPU: the poller, or the peer on a machine with few cores. A spin
 * that never yields holds the CPU for the rest of its time slice
 * (milliseconds), and round trips of 10 us took 500 (poller mode, both
 * ends spinning, two CPUs: four spinners). sched_yield() returns at once
 * when nobody else wants the CPU, so alone it costs ~1% of the spin.
 */
#define VZ_BUSY_YIELD_NS 5000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

bool vz_busy_spin(bool (*ready)(const void *arg), const void *arg, __u32 us,
		  __s64 until_ns)
{
	__s64 end, now, next_yield;
	unsigned int i;

	if (!us)
		return ready(arg);
	now = (__s64)vz_now_ns();
	end = now + (__s64)us * 1000;
	if (until_ns >= 0 && until_ns < end)
		end = until_ns;
	next_yield = now + VZ_BUSY_YIELD_NS;
	for (;;) {
		/* the clock read (vDSO, ~20 ns) is amortised over a few
		 * looks at the ring, which are a cache line each */
		for (i = 0; i < 16; i++) {
			if (ready(arg))
				return true;
			cpu_relax();
		}
		now = (__s64)vz_now_ns();
		if (now >= end)
			return ready(arg);
		if (now >= next_yield) {
			sched_yield();
			next_yield = (__s64)vz_now_ns() + VZ_BUSY_YIELD_NS;
		}
	}
}
