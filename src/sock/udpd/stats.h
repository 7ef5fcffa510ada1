/* SPDX-License-Identifier: BSD-2-Clause */
/* vz-udpd's counters, printed (stats.c). */
#ifndef VZ_SOCK_UDPD_STATS_H
#define VZ_SOCK_UDPD_STATS_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

#include "sock/poller/server.h"
#include "sock/stack/stack.h"
#include "sock/port/port.h"

/* Where the counters are. */
struct vz_udpd_counters {
	const struct vz_stack *stack;
	const struct vz_sock_server *server;
	struct vz_udpd_port *port;
	__u64 sleeps; /* times the poller's loop slept, idle */
};

/* One line into f, flushed: text, or JSON whose "event" is `event`
 * ("summary" adds "summary": true); t is seconds since the start. */
void vz_udpd_print_stats(const struct vz_udpd_counters *c, FILE *f,
			 const char *event, bool json, double t);

#endif
