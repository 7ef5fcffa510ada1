/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libveloz-preload's internals, shared by its three files: the libc calls
 * it falls through to, the re-entrancy guard, and which descriptors are
 * veloz's.
 */
#ifndef VZ_SOCK_PRELOAD_PRELOAD_H
#define VZ_SOCK_PRELOAD_PRELOAD_H

#include <poll.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "veloz/sock.h"

/* The largest UDP payload over IPv4, and the bounce buffer's size. */
#define VZ_PL_MAX_DGRAM 65507
#define VZ_PL_BOUNCE 65536

/* The next definition of each call we shadow: libc's, normally. */
struct vz_libc {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
			struct timespec *);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	/* _FORTIFY_SOURCE's checked variants */
	ssize_t (*recv_chk)(int, void *, size_t, size_t, int);
	ssize_t (*recvfrom_chk)(int, void *, size_t, size_t, int,
				struct sockaddr *, socklen_t *);
	ssize_t (*read_chk)(int, void *, size_t, size_t);
	int (*poll_chk)(struct pollfd *, nfds_t, int, size_t);
	int (*ppoll_chk)(struct pollfd *, nfds_t, const struct timespec *,
			 const sigset_t *, size_t);
};

/* Filled once (dlsym RTLD_NEXT), before any shadowed call runs. */
extern struct vz_libc vz_libc;
void vz_pl_resolve(void);
#define VZ_LIBC(fn) (vz_pl_resolve(), vz_libc.fn)

/*
 * Depth of calls into libveloz-sock on this thread. The library reaches
 * the poller and wakes up through the very calls we shadow (sendmsg on its
 * control socket, poll and read on its eventfds): inside it, every call
 * must go straight to libc.
 */
extern __thread int vz_pl_depth;
#define VZ_CALL(expr)                             \
	({                                        \
		vz_pl_depth++;                    \
		__typeof__(expr) vz_pl_r_ = expr; \
		vz_pl_depth--;                    \
		vz_pl_r_;                         \
	})

/* Whether fd is one of this process's veloz sockets (never inside the
 * library, whose calls are all libc's). */
bool vz_pl_veloz(int fd);
/* Whether a veloz socket may exist (and we are not inside the library). */
bool vz_pl_active_now(void);
/* Whether fd is an epoll set libveloz-sock keeps veloz members for. */
bool vz_pl_epoll(int fd);

/* A thread's buffer for gathering and scattering iovecs (NULL: ENOMEM). */
char *vz_pl_bounce(void);

/* One line on stderr, at most once per `flag`. */
void vz_pl_warn_once(int *flag, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The iovec calls, also behind read/write/readv/writev. */
ssize_t vz_pl_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t vz_pl_recvmsg(int fd, struct msghdr *msg, int flags);

#endif
