/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The poller's side of libveloz-sock: the table of applications and their
 * sockets, and the shared-memory rings between them.
 *
 * Applications connect to a UNIX stream socket (mode 0660, owned by root
 * and the configured group; a client whose SO_PEERCRED is neither root nor
 * in that group is refused). Each socket an application opens gets a memfd
 * holding its receive and transmit rings (lock-free, single producer,
 * single consumer), passed to that application alone over SCM_RIGHTS: no
 * named segment exists, so no application can map another's rings. When an
 * application's connection closes (it exited, or was killed), its sockets
 * and ports are freed at once.
 *
 * The poller calls vz_sock_server_poll() in its loop: it serves control
 * requests (socket, bind, connect, setsockopt, close...) without blocking,
 * drains every transmit ring through the `send` callback, and wakes the
 * applications that wait.
 */
#ifndef VZ_SOCK_POLLER_SERVER_H
#define VZ_SOCK_POLLER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "sock/stack/stack.h"

struct vz_sock_server_config {
	const char *path; /* the UNIX socket; its directory is made 0750 */
	gid_t gid; /* group allowed besides root; (gid_t)-1: root only */
	__be32 local_ip4; /* the stack's address: what bind(INADDR_ANY) gets */
	__u8 local_ip6[16]; /* its IPv6 address (zero: none) */
	unsigned int max_apps; /* 0: 64 */
	unsigned int max_sockets; /* over all applications; 0: 1024 */
	__u32 default_rcvbuf, default_sndbuf; /* ring bytes; 0: 256 KiB */
	__u32 max_buf; /* the largest SO_RCVBUF/SO_SNDBUF; 0: 16 MiB */
};

struct vz_sock_server_stats {
	__u64 apps, apps_total, apps_refused, apps_died;
	__u64 sockets;
	__u64 rx_queued; /* datagrams put on a socket's receive ring */
	__u64 rx_ring_full; /* dropped: the socket's receive ring was full */
	__u64 tx_sent; /* datagrams taken from transmit rings and sent */
	__u64 tx_errors; /* the send callback refused them (its errno) */
	__u64 bad_requests; /* malformed control messages (app dropped) */
};

struct vz_sock_server;

/*
 * Create the listening socket. NULL with errno and a one-line message in
 * err (EADDRINUSE: another poller listens there; EACCES...). A stale
 * socket file left by a poller that died is replaced.
 */
struct vz_sock_server *vz_sock_server_new(const struct vz_sock_server_config *,
					  char *err, size_t errlen);
/* Close every connection, unmap every ring, remove the socket file. */
void vz_sock_server_free(struct vz_sock_server *srv);

/*
 * Send one datagram a socket queued: m->src_ip/src_port are the socket's
 * (the server fills an unbound socket's port first, as the kernel does).
 * Returns 0 or a negative errno, which the server reports to the
 * application through SO_ERROR and the next send.
 */
typedef int (*vz_sock_send_fn)(void *opaque, const struct vz_dgram_meta *m,
			       const void *payload, size_t len);

/*
 * One round of the poller's loop: control requests, transmit rings (at
 * most `budget` datagrams), wake-ups. Never blocks. Returns the work done
 * (requests + datagrams), so the caller can tell idle from busy.
 */
unsigned int vz_sock_server_poll(struct vz_sock_server *srv,
				 vz_sock_send_fn send, void *opaque,
				 unsigned int budget);

/*
 * A datagram the stack received for this host (vz_stack_ops.deliver can
 * call this directly): onto the receive ring of the socket bound to
 * m->dst_port (and connected to the sender, if it is connected), spread
 * over SO_REUSEPORT groups by a hash of the sender. 0 when a socket took
 * it or its ring was full (counted), -1 when none is bound to the port.
 */
int vz_sock_server_deliver(struct vz_sock_server *srv,
			   const struct vz_dgram_meta *m, const void *payload,
			   size_t len);

/* A descriptor to wait on (epoll) for control traffic. */
int vz_sock_server_fd(const struct vz_sock_server *srv);

/*
 * Going to sleep (need_wakeup, for the applications' side): set every
 * socket's poller_asleep word, so an application that queues a datagram
 * rings the doorbell (which wakes vz_sock_server_fd()). False when a
 * transmit ring holds datagrams already: do not sleep. Either way, call
 * vz_sock_server_sleep_done() once awake (or not sleeping after all).
 */
bool vz_sock_server_sleep_prepare(struct vz_sock_server *srv);
void vz_sock_server_sleep_done(struct vz_sock_server *srv);

const struct vz_sock_server_stats *
vz_sock_server_get_stats(const struct vz_sock_server *srv);

#endif
