// SPDX-License-Identifier: BSD-2-Clause
/*
 * Busy polling and CPU pinning for libveloz-sock (busy.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sock/app/busy.h"
#include "sock/app/clock.h"

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

/* How often a spinner looks again whether it has a CPU to itself. */
#define VZ_BUSY_RECHECK_NS 1000000

static pthread_once_t loadavg_once = PTHREAD_ONCE_INIT;
static int loadavg_fd = -1;
static long online_cpus;

static void loadavg_open(void)
{
	loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
}

/* The runnable threads now, this one included (/proc/loadavg's fourth
 * field, "running/total"); -1 when it cannot be read. */
static long runnable_now(void)
{
	char buf[128], *p = buf;
	ssize_t n = pread(loadavg_fd, buf, sizeof(buf) - 1, 0);
	int spaces = 0;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	while (*p && spaces < 3)
		spaces += *p++ == ' ';
	return spaces == 3 ? strtol(p, NULL, 10) : -1;
}

bool vz_busy_cpu_free(void)
{
	static __s64 next_look;
	static bool free_cpu = true;
	__s64 now = (__s64)vz_now_ns();
	long running;

	pthread_once(&loadavg_once, loadavg_open);
	if (loadavg_fd < 0 || online_cpus < 1)
		return true;
	/* racy by design: two threads may both look, and either answer
	 * holds for a millisecond */
	if (now < __atomic_load_n(&next_look, __ATOMIC_RELAXED))
		return __atomic_load_n(&free_cpu, __ATOMIC_RELAXED);
	__atomic_store_n(&next_look, now + VZ_BUSY_RECHECK_NS,
			 __ATOMIC_RELAXED);
	running = runnable_now();
	__atomic_store_n(&free_cpu, running < 0 || running <= online_cpus,
			 __ATOMIC_RELAXED);
	return __atomic_load_n(&free_cpu, __ATOMIC_RELAXED);
}

bool vz_busy_spin(bool (*ready)(const void *arg), const void *arg, __u32 us,
		  __s64 until_ns)
{
	if (!us || !vz_busy_cpu_free())
		return ready(arg);
	return vz_busy_spin_offering(ready, arg, us, until_ns);
}

bool vz_busy_spin_offering(bool (*ready)(const void *arg), const void *arg,
			   __u32 us, __s64 until_ns)
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
