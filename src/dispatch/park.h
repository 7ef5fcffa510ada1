/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Parking a dispatcher's worker, shared by the afxdp and dpdk dispatchers:
 * an idle worker sleeps on a futex word (1 while parked) and the
 * dispatcher wakes it after pushing a frame to its ring.
 */
#ifndef VZ_DISPATCH_PARK_H
#define VZ_DISPATCH_PARK_H

#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/types.h>
#include <sys/syscall.h>

/* Sleep while *word is 1; bounded (100 ms), so that a stopping run is seen
 * without a wake-up. */
static inline void vz_park_wait(int *word)
{
	struct timespec timeout = { .tv_nsec = 100 * 1000000 };

	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 1, &timeout, NULL, 0);
}

/*
 * After a push: the exchange is a full barrier, so either the worker sees
 * the frame before it sleeps or this sees it asleep (a plain load here
 * could pass the ring's store and both would miss). True if it was asleep.
 */
static inline bool vz_park_wake(int *word)
{
	if (!__atomic_exchange_n(word, 0, __ATOMIC_SEQ_CST))
		return false;
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return true;
}

#endif
