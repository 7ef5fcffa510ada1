/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * veloz/sock.h: libveloz-sock, POSIX-like datagram sockets on veloz's
 * userspace UDP/IP stack. The calls mirror their BSD namesakes (same
 * arguments, same return values, errno set on failure).
 *
 * A veloz descriptor is a real file descriptor of the process: an eventfd
 * the poller signals when a socket that an application waits on becomes
 * readable or writable. So it never collides with the process's other
 * files, and poll/select can wait on veloz and kernel descriptors together
 * (vz_poll and vz_select accept both); the LD_PRELOAD shim tells them apart
 * with vz_is_socket().
 *
 * The stack runs in a poller process (`veloz udpd`) that owns the port. An
 * application connects to it once (vz_sock_init, or lazily on the first
 * call) and gets, for each socket, a pair of shared-memory rings mapped
 * from a memfd that only it and the poller hold.
 */
#ifndef VELOZ_SOCK_H
#define VELOZ_SOCK_H

#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the poller listens unless VZ_UDPD_SOCKET says otherwise. */
#define VZ_UDPD_DEFAULT_SOCKET "/run/veloz/udpd/udpd.sock"

/*
 * Connect to the poller at `path` (NULL: $VZ_UDPD_SOCKET, else the
 * default). Called implicitly by the first vz_socket(); explicit calls
 * report the failure: -1 with errno (ENOENT, ECONNREFUSED, EACCES...).
 *
 * Every call that asks the poller (this one, socket, bind, connect, the
 * setsockopts that change the rings, close) waits at most
 * $VZ_UDPD_TIMEOUT_MS (5000) for its answer, then fails with ETIMEDOUT
 * (close still closes) and drops the link: the poller frees the sockets
 * made on it, and calls on them fail with ECONNRESET from then on. A
 * poller that restarts is reconnected to by the next vz_socket().
 */
int vz_sock_init(const char *path);
/* Close every socket and the link to the poller. */
void vz_sock_exit(void);

/* AF_INET (and AF_INET6 once the stack has it), SOCK_DGRAM, protocol 0 or
 * IPPROTO_UDP; SOCK_NONBLOCK and SOCK_CLOEXEC may be or-ed into type. */
int vz_socket(int domain, int type, int protocol);
int vz_bind(int fd, const struct sockaddr *addr, socklen_t len);
int vz_connect(int fd, const struct sockaddr *addr, socklen_t len);
ssize_t vz_sendto(int fd, const void *buf, size_t len, int flags,
		  const struct sockaddr *to, socklen_t tolen);
ssize_t vz_recvfrom(int fd, void *buf, size_t len, int flags,
		    struct sockaddr *from, socklen_t *fromlen);
ssize_t vz_send(int fd, const void *buf, size_t len, int flags);
ssize_t vz_recv(int fd, void *buf, size_t len, int flags);
/* Closes a descriptor: the socket itself goes with its last one (see
 * vz_dup). Also closes an epoll descriptor from vz_epoll_create1. */
int vz_close(int fd);
/*
 * The message calls, with Linux's semantics: msg_control must be empty
 * (EOPNOTSUPP); the mmsg calls do up to vlen (capped at 1024, UIO_MAXIOV)
 * and stop at the first failure, reported only when nothing was done. A
 * burst costs one ring record per datagram; the poller sends them in one
 * round. recvmmsg honours MSG_WAITFORONE; its timeout is looked at after
 * each datagram, as the kernel's.
 */
struct mmsghdr; /* <sys/socket.h> defines it under _GNU_SOURCE */
ssize_t vz_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t vz_recvmsg(int fd, struct msghdr *msg, int flags);
int vz_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags);
int vz_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		struct timespec *timeout);
/* Descriptor copies (F_DUPFD and F_DUPFD_CLOEXEC of vz_fcntl too): the new
 * descriptor names the same socket. vz_dup2/vz_dup3 take any descriptors;
 * a veloz socket that newfd named loses that descriptor. */
int vz_dup(int fd);
int vz_dup2(int oldfd, int newfd);
int vz_dup3(int oldfd, int newfd, int flags);
int vz_getsockname(int fd, struct sockaddr *addr, socklen_t *len);
int vz_getpeername(int fd, struct sockaddr *addr, socklen_t *len);
/* SOL_SOCKET: SO_RCVBUF, SO_SNDBUF, SO_REUSEADDR, SO_REUSEPORT,
 * SO_RCVTIMEO, SO_SNDTIMEO, SO_TYPE, SO_ERROR, SO_DOMAIN; SO_BUSY_POLL
 * (microseconds a blocking call spins on its ring before it sleeps; a new
 * socket takes $VZ_BUSY_POLL_US, else 0). $VZ_CPU pins the thread that
 * makes the first socket to that CPU. */
int vz_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int vz_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
/* F_GETFL / F_SETFL with O_NONBLOCK. */
int vz_fcntl(int fd, int cmd, int arg);
/* POLLIN / POLLOUT; veloz and kernel descriptors may be mixed. */
int vz_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
int vz_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
	      struct timeval *timeout);
/*
 * epoll over veloz and kernel descriptors together, with Linux's
 * semantics: level- and edge-triggered (EPOLLET: reported again only after
 * a datagram arrives, room is made, or an error is set), EPOLLONESHOT,
 * EPOLLERR always; Linux's errnos for misuse. The set is a kernel epoll
 * holding the kernel descriptors; the veloz ones are kept beside it and
 * checked from their rings, so an epoll set holding veloz sockets and
 * nested in another epoll set wakes that one only for its kernel members.
 * Close it with vz_close().
 */
int vz_epoll_create1(int flags);
int vz_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int vz_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  int timeout_ms);
/* The mask is swapped around the wait, not atomically with it. */
int vz_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *mask);
/* True when fd is a veloz descriptor (the LD_PRELOAD shim's question). */
int vz_is_socket(int fd);
/* True when fd is an epoll set this library keeps veloz members for (or
 * made): close it with vz_close (the shim's question). */
int vz_is_epoll(int fd);

#ifdef __cplusplus
}
#endif

#endif
