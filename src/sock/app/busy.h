/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Busy polling for libveloz-sock, in the way of Linux's SO_BUSY_POLL and
 * net.core.busy_read: a blocking receive (or send waiting for room) spins
 * on its ring for a bounded number of microseconds before it sleeps on its
 * eventfd. Spinning saves the eventfd wake-up (the poller's write, a
 * context switch in, the scheduler's latency) when the answer is close;
 * the bound keeps an idle application from burning its CPU.
 *
 * The per-socket value is SO_BUSY_POLL (microseconds, int, >= 0); a new
 * socket starts with $VZ_BUSY_POLL_US (0, off, when unset or invalid:
 * as net.core.busy_read's default).
 *
 * $VZ_CPU pins the thread that makes the first veloz socket to one CPU
 * (the poller has --cpu): on a machine with few cores, keeping the two
 * spinners apart is what makes spinning pay.
 */
#ifndef VZ_SOCK_APP_BUSY_H
#define VZ_SOCK_APP_BUSY_H

#include <stdbool.h>
#include <linux/types.h>

/* The longest spin accepted, as a sanity bound: one second. */
#define VZ_BUSY_POLL_MAX_US 1000000u

/* $VZ_BUSY_POLL_US, parsed once: 0 when unset or not a number in
 * [0, VZ_BUSY_POLL_MAX_US]. */
__u32 vz_busy_default_us(void);

/* Pin the calling thread to $VZ_CPU, once per process (a no-op when
 * unset; a bad value is ignored after one line on stderr). */
void vz_busy_pin_from_env(void);

/*
 * Whether a spinner would have a CPU to itself: the runnable threads (the
 * kernel's count, the caller included) fit on the online CPUs. With more
 * spinners than CPUs (two ends of a ping-pong and their pollers on two
 * CPUs), every hand-off waits for one of them to yield, and sleeping at
 * once is faster. Looked at once a millisecond at most.
 */
bool vz_busy_cpu_free(void);

/*
 * Spin until ready(arg) is true, at most `us` microseconds and never past
 * `until_ns` (CLOCK_MONOTONIC, < 0: none), when a CPU is free for it
 * (vz_busy_cpu_free; else only one look). True when ready.
 */
bool vz_busy_spin(bool (*ready)(const void *arg), const void *arg, __u32 us,
		  __s64 until_ns);
/* The same spin whether a CPU is free or not, for a caller that keeps its
 * spinners to one per process already: its CPU is offered every few
 * microseconds all the same. */
bool vz_busy_spin_offering(bool (*ready)(const void *arg), const void *arg,
			   __u32 us, __s64 until_ns);

#endif
