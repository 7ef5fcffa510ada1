/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Direct mode of libveloz-sock: run to completion, no poller.
 *
 * With VZ_MODE=direct the process owns an interface itself: it opens
 * udpd's port (src/sock/port: the interface lock, the steering program for its
 * address, one AF_XDP socket per queue) and runs the protocol engine
 * (stack/) in its own threads, an engine per queue. A receive polls the
 * AF_XDP ring and runs the engine on what came, in the caller's thread; a
 * send runs the engine and kicks the port. No process hop, no shared ring.
 * A socket is an eventfd, readable while a datagram is queued, so the
 * kernel's poll, select and epoll (edge-triggered, EPOLLONESHOT, nested
 * sets, dup copies) work on it; each engine's background thread, sleeping
 * on its AF_XDP socket, runs it when a frame comes and no application
 * thread is polling it, so waiters wake and ARP, NDP and ICMP echo are
 * answered meanwhile.
 *
 * The same vz_ calls (and so the LD_PRELOAD shim) work: libveloz-sock runs
 * them here through direct mode's operations (direct_mode.c, the table of
 * src/sock/app/mode.h) when vz_direct_enabled(). Configuration, from the
 * environment:
 *   VZ_DIRECT_IFACE   the interface (required)
 *   VZ_DIRECT_ADDR    A.B.C.D/LEN, the stack's address (required)
 *   VZ_DIRECT_GATEWAY A.B.C.D for off-link destinations
 *   VZ_DIRECT_ADDR6   ADDR/LEN, the stack's IPv6 address (optional; without
 *                     it an AF_INET6 socket is EAFNOSUPPORT, which the shim
 *                     leaves to the kernel). The steering program then also
 *                     takes its frames and its solicited-node group's; NDP
 *                     and ICMPv6 echo are answered as ARP and ICMP are.
 *                     AF_INET6 sockets follow Linux: IPV6_V6ONLY starts as
 *                     net.ipv6.bindv6only says (0: off), and one bound to ::
 *                     with it off takes IPv4 too, as v4-mapped addresses
 *   VZ_DIRECT_GATEWAY6 ADDR, an IPv6 router for off-link destinations
 *   VZ_DIRECT_SKB     1: generic XDP (any interface)
 *   VZ_DIRECT_STEER   the steering object (default: udpd's, found beside
 *                     libveloz-sock in the build tree)
 *   VZ_BUSY_POLL_US   how long a blocking receive, poll, select or
 *                     epoll_wait spins running the engine before it
 *                     sleeps (default here: 200)
 * One line on stderr and an errno for a bad one. A program left by a
 * process that was killed (the interface lock is free) is removed as
 * udpd's --replace does; one whose owner lives is refused.
 */
#ifndef VZ_SOCK_DIRECT_DIRECT_H
#define VZ_SOCK_DIRECT_DIRECT_H

#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

bool vz_direct_enabled(void);
/* Open the port and start the engine (once): 0 or -1 with errno. */
int vz_direct_init(void);
bool vz_direct_fd(int fd);
/* fd is handed to epoll_ctl, poll or select: keep its eventfd's readiness
 * from now on (direct_internal.h, watched). Nothing for any other descriptor.
 */
void vz_direct_watch(int fd);

int vz_direct_socket(int domain, int type, int protocol);
int vz_direct_bind(int fd, const struct sockaddr *addr, socklen_t len);
int vz_direct_connect(int fd, const struct sockaddr *addr, socklen_t len);
ssize_t vz_direct_sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *to, socklen_t tolen);
ssize_t vz_direct_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *from, socklen_t *fromlen);
int vz_direct_close(int fd);
int vz_direct_getsockname(int fd, struct sockaddr *addr, socklen_t *len);
int vz_direct_getpeername(int fd, struct sockaddr *addr, socklen_t *len);
int vz_direct_getsockopt(int fd, int level, int name, void *val,
			 socklen_t *len);
int vz_direct_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len);
int vz_direct_fcntl(int fd, int cmd, int arg);
/* dup2/dup3 where oldfd or newfd is a direct socket (oldfd != newfd). */
int vz_direct_dup3(int oldfd, int newfd, int flags);
/* Between begin and end (one thread's mmsg call), sends queue frames and
 * the port is kicked once at the end: a burst costs one kick. */
void vz_direct_burst(bool begin);
/* Any entries, veloz (direct) and kernel together. */
int vz_direct_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
/*
 * A kernel wait (epoll_wait, poll) over descriptors that may be direct
 * sockets: check(arg, ms) is the call, returning as it does. With the
 * engine running, it first spins for the busy-poll budget, turning the
 * engine and calling check(arg, 0), then calls check(arg, what is left of
 * timeout_ms).
 */
int vz_direct_wait(int (*check)(void *arg, int ms), void *arg, int timeout_ms);

#endif
