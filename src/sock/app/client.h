/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libveloz-sock's internals shared between poll.c (poll, select) and
 * epoll.c: a socket's readiness and wake-up words, so epoll asks the very
 * same questions poll does. Hidden: not part of the library's ABI.
 */
#ifndef VZ_SOCK_APP_CLIENT_H
#define VZ_SOCK_APP_CLIENT_H

#include <linux/types.h>
#include <stdbool.h>

#define VZ_HIDDEN __attribute__((visibility("hidden")))

struct vz_app_sock;

/* The socket behind a veloz descriptor, NULL for any other (no lock). */
VZ_HIDDEN struct vz_app_sock *vz_client_lookup(int fd);
/* poll()'s revents for `events` (POLLIN, POLLOUT), POLLERR when SO_ERROR
 * is pending: vz_poll's own test. */
VZ_HIDDEN short vz_client_revents(const struct vz_app_sock *s, short events);
/* Ask the poller to write the socket's eventfd when the receive ring
 * (POLLIN) or transmit ring (POLLOUT) moves; 0 withdraws. Fenced. */
VZ_HIDDEN void vz_client_set_waiting(struct vz_app_sock *s, short events,
				     __u32 on);
/* A live descriptor of the socket (its eventfd), to sleep on. */
VZ_HIDDEN int vz_client_efd(const struct vz_app_sock *s);
/* Its SO_BUSY_POLL, microseconds (0: no spin before sleeping). */
VZ_HIDDEN __u32 vz_client_busy_us(const struct vz_app_sock *s);
/* Empty an eventfd (it is non-blocking). */
VZ_HIDDEN void vz_client_drain(int efd);
/* Where things stand: the receive ring's head (datagrams in), the
 * transmit ring's tail (room made) and SO_ERROR. A change between two
 * looks is edge-triggered epoll's "a wake-up happened". */
VZ_HIDDEN void vz_client_marks(const struct vz_app_sock *s, __u32 mark[3]);

/* epoll.c's side: forget every entry of socket s (its last descriptor is
 * closing; under the library's control lock), forget all after fork(),
 * and whether fd is an epoll set holding veloz entries (closing it frees
 * them, vz_close(fd)). */
VZ_HIDDEN void vz_epoll_sock_gone(struct vz_app_sock *s);
VZ_HIDDEN void vz_epoll_forked(void);
VZ_HIDDEN bool vz_epoll_forget(int epfd);

#endif
