// SPDX-License-Identifier: BSD-2-Clause
/*
 * include/veloz/sock.h's calls, each run by the mode that owns the
 * descriptor (mode.h), and poller mode's table: the vz_poller_ calls of
 * client.c, socket.c, datagram.c, sockopt.c and poll.c.
 */
#include "sock/app/app_internal.h"
#include "veloz/sock.h"

static bool poller_chosen(void)
{
	return true; /* the default, whatever VZ_MODE asks of another mode */
}

/* A kernel wait is the kernel's: the poller wakes the sockets' eventfds. */
static int poller_wait(int (*check)(void *arg, int ms), void *arg,
		       int timeout_ms)
{
	return check(arg, timeout_ms);
}

static bool poller_owns(int fd)
{
	return vz_client_lookup(fd) != NULL;
}

/* The poller's epoll follows its sockets' rings itself (epoll.c). */
static void poller_watch(int fd)
{
	(void)fd;
}

/* Each send is on the ring when it returns: nothing is held. */
static void poller_burst(bool begin)
{
	(void)begin;
}

const struct vz_sock_mode vz_poller_mode = {
	.chosen = poller_chosen,
	.init = vz_poller_init,
	.socket = vz_poller_socket,
	.poll = vz_poller_poll,
	.wait = poller_wait,
	.owns = poller_owns,
	.watch = poller_watch,
	.burst = poller_burst,
	.close = vz_poller_close,
	.dup3 = vz_poller_dup3,
	.fcntl = vz_poller_fcntl,
	.bind = vz_poller_bind,
	.connect = vz_poller_connect,
	.getsockname = vz_poller_getsockname,
	.getpeername = vz_poller_getpeername,
	.getsockopt = vz_poller_getsockopt,
	.setsockopt = vz_poller_setsockopt,
	.sendto = vz_poller_sendto,
	.recvfrom = vz_poller_recvfrom,
};

int vz_sock_init(const char *path)
{
	return vz_mode()->init(path);
}

int vz_socket(int domain, int type, int protocol)
{
	return vz_mode()->socket(domain, type, protocol);
}

int vz_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	return vz_mode()->poll(fds, n, timeout_ms);
}

int vz_close(int fd)
{
	return vz_mode_of(fd)->close(fd);
}

int vz_fcntl(int fd, int cmd, int arg)
{
	return vz_mode_of(fd)->fcntl(fd, cmd, arg);
}

int vz_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	return vz_mode_of(fd)->bind(fd, addr, len);
}

int vz_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return vz_mode_of(fd)->connect(fd, addr, len);
}

int vz_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	return vz_mode_of(fd)->getsockname(fd, addr, len);
}

int vz_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	return vz_mode_of(fd)->getpeername(fd, addr, len);
}

int vz_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return vz_mode_of(fd)->getsockopt(fd, level, name, val, len);
}

int vz_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return vz_mode_of(fd)->setsockopt(fd, level, name, val, len);
}

ssize_t vz_sendto(int fd, const void *buf, size_t len, int flags,
		  const struct sockaddr *to, socklen_t tolen)
{
	return vz_mode_of(fd)->sendto(fd, buf, len, flags, to, tolen);
}

ssize_t vz_recvfrom(int fd, void *buf, size_t len, int flags,
		    struct sockaddr *from, socklen_t *fromlen)
{
	return vz_mode_of(fd)->recvfrom(fd, buf, len, flags, from, fromlen);
}
