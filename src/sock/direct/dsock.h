/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Direct mode's inside (direct.h is its API), shared by:
 *
 *   direct.c       the engine (the stack and udpd's port in this process),
 *                  its set-up, and the data path: sendto, recvfrom, poll
 *   direct_sock.c  the socket calls: socket, close, bind, connect, the
 *                  names, the options, fcntl
 *
 * One lock (vz_direct.lock) serialises the engine, the port and the
 * sockets' receive queues.
 */
#ifndef VZ_SOCK_DIRECT_DSOCK_H
#define VZ_SOCK_DIRECT_DSOCK_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <linux/types.h>

#include "common/clock.h"
#include "sock/udpd/port.h"

#define VZ_DIRECT_HIDDEN __attribute__((visibility("hidden")))

#define QLEN 256 /* datagrams queued per socket before drops */
#define MAX_FD 65536
#define EPH_LO 32768u
#define EPH_HI 60999u
/* A blocking call's spin unless $VZ_BUSY_POLL_US says otherwise. Waking
 * from poll() on an AF_XDP socket (veth, copy mode) takes tens of us: with
 * a spin shorter than that, two ping-ponging ends fall into sleeping on
 * every round trip and stay there, each round trip paying two wake-ups;
 * 200 us keeps them spinning. */
#define DEFAULT_BUSY_US 200
#define IDLE_NS 1000000 /* the background thread runs the engine after */

struct dgram {
	__be32 addr;
	__be16 port;
	size_t len;
	unsigned char data[];
};

struct dsock {
	int fd;
	bool nonblock;
	__be32 ip, peer_ip;
	__be16 port, peer_port; /* network order; 0: unbound/unconnected */
	__u32 busy_us;
	struct timeval rcvtimeo;
	struct dgram *q[QLEN];
	unsigned int head, tail; /* free-running */
	__u64 drops;
};

struct vz_direct_state {
	pthread_mutex_t lock;
	struct vz_udpd_port *port;
	struct vz_stack *stack;
	struct dsock *by_port[65536]; /* host order */
	struct dsock *by_fd[MAX_FD];
	int xfds[VZ_UDPD_MAX_QUEUES];
	unsigned int nxfds;
	__u64 last_run, last_tick;
	__u32 eph_next;
	__be32 ip4;
	pthread_t bg;
	volatile int stop;
	int init_err; /* positive errno once init failed */
	bool ready;
};

VZ_DIRECT_HIDDEN extern struct vz_direct_state vz_direct;

static inline int fail(int rc)
{
	errno = rc;
	return -1;
}

static inline struct dsock *get(int fd)
{
	struct dsock *s = fd >= 0 && fd < MAX_FD ? vz_direct.by_fd[fd] : NULL;

	if (!s)
		errno = EBADF;
	return s;
}

/* Under vz_direct.lock (direct_sock.c): bind s, port 0 for an ephemeral
 * one: 0 or a positive errno. */
VZ_DIRECT_HIDDEN int vz_direct_bind_locked(struct dsock *s, __be32 ip,
					   __u16 port);
/* Copy an AF_INET address out as the kernel does (direct_sock.c). */
VZ_DIRECT_HIDDEN int vz_direct_sin_put(struct sockaddr *sa, socklen_t *len,
				       __be32 ip, __be16 port);
/* The address a caller passes: 0 or a positive errno (direct_sock.c). */
VZ_DIRECT_HIDDEN int vz_direct_sin_get(const struct sockaddr *sa, socklen_t len,
				       struct sockaddr_in *sin);

#endif
