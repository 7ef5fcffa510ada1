/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * How the process reaches the stack: its mode. Each of include/veloz/sock.h's
 * calls asks which mode owns the descriptor and runs that mode's operation
 * (mode.c):
 *
 *   poller mode  vz-udpd owns the interface; the application side of the
 *                socket rings (the files app_internal.h lists). The default.
 *   direct mode  the process runs the stack on its own AF_XDP socket
 *                (src/sock/direct, VZ_MODE=direct), when libveloz-sock is
 *                built with it.
 *
 * A direct descriptor is not in the poller's table, and looking one up there
 * would cost a system call (fcntl) on a miss: direct mode is asked first.
 */
#ifndef VZ_SOCK_APP_MODE_H
#define VZ_SOCK_APP_MODE_H

#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef VZ_HIDDEN
#define VZ_HIDDEN __attribute__((visibility("hidden")))
#endif

struct vz_sock_mode {
	/* The process's: whether VZ_MODE chose this mode, its set-up (path:
	 * the poller's control socket, or NULL for the default), new sockets,
	 * poll over any descriptors, and a kernel wait (epoll_wait on a set
	 * that holds no poller-mode socket): check(arg, ms) is that wait. */
	bool (*chosen)(void);
	int (*init)(const char *path);
	int (*socket)(int domain, int type, int protocol);
	int (*poll)(struct pollfd *fds, nfds_t n, int timeout_ms);
	int (*wait)(int (*check)(void *arg, int ms), void *arg, int timeout_ms);
	/* A descriptor's. watch: fd joins a kernel epoll set, poll or select
	 * (direct mode then keeps its eventfd's readiness). burst: between
	 * true and false (one thread's sendmmsg), sends may be held and
	 * flushed at once. */
	bool (*owns)(int fd);
	void (*watch)(int fd);
	void (*burst)(bool begin);
	int (*close)(int fd);
	int (*dup3)(int oldfd, int newfd, int flags);
	int (*fcntl)(int fd, int cmd, int arg);
	int (*bind)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*getsockname)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*getpeername)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*getsockopt)(int fd, int level, int name, void *val,
			  socklen_t *len);
	int (*setsockopt)(int fd, int level, int name, const void *val,
			  socklen_t len);
	ssize_t (*sendto)(int fd, const void *buf, size_t len, int flags,
			  const struct sockaddr *to, socklen_t tolen);
	ssize_t (*recvfrom)(int fd, void *buf, size_t len, int flags,
			    struct sockaddr *from, socklen_t *fromlen);
};

VZ_HIDDEN extern const struct vz_sock_mode vz_poller_mode;
/* Defined by src/sock/direct when it is linked in; NULL otherwise. */
VZ_HIDDEN extern const struct vz_sock_mode vz_direct_mode __attribute__((weak));

/* The process's mode: direct if it is built in and chosen. */
static inline const struct vz_sock_mode *vz_mode(void)
{
	if (&vz_direct_mode && vz_direct_mode.chosen())
		return &vz_direct_mode;
	return &vz_poller_mode;
}

/* The mode that owns fd (poller mode for a descriptor none owns: its
 * calls give the kernel's errno for it). */
static inline const struct vz_sock_mode *vz_mode_of(int fd)
{
	if (&vz_direct_mode && vz_direct_mode.owns(fd))
		return &vz_direct_mode;
	return &vz_poller_mode;
}

/* dup2 and dup3: the mode that owns either descriptor. */
static inline const struct vz_sock_mode *vz_mode_of2(int a, int b)
{
	const struct vz_sock_mode *m = vz_mode_of(a);

	return m != &vz_poller_mode ? m : vz_mode_of(b);
}

#endif
