// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: the socket calls (socket, close, dup, fcntl, bind,
 * connect, getsockname, getpeername), each a request to the poller over the
 * control connection (client.c), and the descriptor table kept in step.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sock/app/busy.h"
#include "sock/app/app_internal.h"
#include "sock/ring/proto.h"
#include "veloz/sock.h"

static int check_type(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (domain != AF_INET && domain != AF_INET6)
		return -EAFNOSUPPORT;
	if (base <= 0 || base > SOCK_PACKET)
		return -EINVAL;
	if (base == SOCK_STREAM)
		return -EPROTONOSUPPORT; /* no TCP in the stack */
	if (base != SOCK_DGRAM)
		return -ESOCKTNOSUPPORT;
	if (protocol && protocol != IPPROTO_UDP)
		return -EPROTONOSUPPORT;
	return 0;
}

int vz_poller_socket(int domain, int type, int protocol)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_SOCKET, .opt = (__u32)domain },
			  rep;
	struct vz_app_sock *s;
	int rc, memfd = -1;

	vz_client_libc_init();
	rc = check_type(domain, type, protocol);
	if (rc)
		goto out;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	s->nonblock = type & SOCK_NONBLOCK;
	s->busy_us = vz_busy_default_us();
	vz_busy_pin_from_env();
	s->v6 = domain == AF_INET6;
	s->refs = 1;
	pthread_mutex_init(&s->rx_lock, NULL);
	pthread_mutex_init(&s->tx_lock, NULL);
	s->fd = eventfd(0,
			EFD_NONBLOCK | (type & SOCK_CLOEXEC ? EFD_CLOEXEC : 0));
	if (s->fd < 0) {
		rc = -errno;
		free(s);
		goto out;
	}
	rc = vz_client_ctl_call(&req, s->fd, &rep, &memfd, &s->link);
	if (!rc && rep.err)
		rc = -rep.err;
	if (!rc)
		rc = memfd < 0
			     ? -EPROTO
			     : vz_client_map(s, memfd, rep.rcvbuf, rep.sndbuf);
	if (memfd >= 0)
		vz_client_libc.close(memfd);
	if (!rc) {
		s->id = rep.id;
		pthread_mutex_lock(&vz_client_lock);
		rc = vz_client_table_set(s->fd, s);
		pthread_mutex_unlock(&vz_client_lock);
	}
	if (rc) {
		vz_client_unmap(s);
		vz_client_libc.close(
			s->fd); /* the poller frees its side on close */
		free(s);
		goto out;
	}
	return s->fd;
out:
	errno = -rc;
	return -1;
}

/* Tell the poller that s's last descriptor is gone, then free it. */
static void sock_last_close(struct vz_app_sock *s)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_CLOSE }, rep;

	/* Whatever the poller says, the descriptor is gone (as close()). */
	vz_client_call(s, &req, &rep, NULL);
	pthread_mutex_lock(&vz_client_lock);
	vz_client_destroy(s);
	pthread_mutex_unlock(&vz_client_lock);
}

int vz_poller_close(int fd)
{
	struct vz_app_sock *s = lookup(fd);
	bool last;

	vz_client_libc_init();
	if (!s && vz_epoll_forget(fd))
		return vz_client_libc.close(
			fd); /* an epoll set that held veloz sockets */
	if (!s)
		return sock_get(fd) ? 0 : -1;
	pthread_mutex_lock(&vz_client_lock);
	if (lookup(fd) != s) { /* another thread closed it first */
		pthread_mutex_unlock(&vz_client_lock);
		return fail(-EBADF);
	}
	last = vz_client_release(fd, s, false);
	pthread_mutex_unlock(&vz_client_lock);
	if (last)
		sock_last_close(s);
	return 0;
}

/*
 * dup2/dup3 for any pair where either side may be veloz's: the kernel
 * makes newfd a copy of oldfd's file (an eventfd for a veloz socket), then
 * the table follows: newfd names oldfd's socket, and a socket newfd named
 * loses that descriptor (closed if it was the last, as dup2 closes newfd).
 */
int vz_poller_dup3(int oldfd, int newfd, int flags)
{
	struct vz_app_sock *so, *sn;
	bool last = false;
	int rc;

	vz_client_libc_init();
	pthread_mutex_lock(&vz_client_lock);
	so = lookup(oldfd);
	sn = lookup(newfd);
	if (so && !sn && newfd >= VZ_FD_CHUNK * VZ_FD_CHUNKS) {
		pthread_mutex_unlock(&vz_client_lock);
		return fail(-EMFILE); /* beyond what the table can name */
	}
	rc = vz_client_libc.dup3(oldfd, newfd, flags);
	if (rc < 0) {
		pthread_mutex_unlock(&vz_client_lock);
		return -1;
	}
	if (sn)
		last = vz_client_release(newfd, sn, true);
	if (so && !vz_client_table_set(newfd, so))
		so->refs++;
	pthread_mutex_unlock(&vz_client_lock);
	if (!sn)
		vz_epoll_forget(newfd); /* an epoll set it named is closed */
	if (last)
		sock_last_close(sn);
	return newfd;
}

int vz_dup(int fd)
{
	return vz_fcntl(fd, F_DUPFD, 0);
}

int vz_dup2(int oldfd, int newfd)
{
	vz_client_libc_init();
	if (oldfd == newfd) /* nothing to do, once oldfd is known open */
		return vz_client_libc.fcntl(oldfd, F_GETFD) < 0 ? fail(-EBADF)
								: newfd;
	return vz_mode_of2(oldfd, newfd)->dup3(oldfd, newfd, 0);
}

int vz_dup3(int oldfd, int newfd, int flags)
{
	if (flags & ~O_CLOEXEC)
		return fail(-EINVAL);
	if (oldfd == newfd)
		return fail(-EINVAL);
	return vz_mode_of2(oldfd, newfd)->dup3(oldfd, newfd, flags);
}

/* F_DUPFD, F_DUPFD_CLOEXEC: the lowest free descriptor >= min names s. */
static int dup_min(struct vz_app_sock *s, int fd, int cmd, int min)
{
	int nfd = vz_client_libc.fcntl(fd, cmd, min), rc;

	if (nfd < 0)
		return -1;
	pthread_mutex_lock(&vz_client_lock);
	rc = lookup(fd) == s ? vz_client_table_set(nfd, s) : -EBADF;
	if (!rc)
		s->refs++;
	pthread_mutex_unlock(&vz_client_lock);
	if (rc) {
		vz_client_libc.close(nfd);
		return fail(rc);
	}
	return nfd;
}

int vz_poller_fcntl(int fd, int cmd, int arg)
{
	struct vz_app_sock *s;
	s = sock_get(fd);

	if (!s)
		return -1;
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		/* The eventfd itself stays non-blocking: only we read it. */
		s->nonblock = arg & O_NONBLOCK;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return vz_client_libc.fcntl(fd, cmd, arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return dup_min(s, fd, cmd, arg);
	default:
		return fail(-EINVAL);
	}
}

int vz_is_socket(int fd)
{
	return vz_mode_of(fd)->owns(fd);
}

/* An address of the socket's family from the caller: 0 or -errno. An
 * AF_INET6 one may be RFC 2133's, without sin6_scope_id, as Linux takes. */

/* The caller's address into a request (bind, connect). */
static void req_addr(struct vz_ctl_msg *req, const struct vz_addr *a)
{
	req->addr = a->ip;
	memcpy(req->addr6, a->ip6, 16);
	req->port = a->port;
}

/* bind's and connect's round trip, then the local address the poller
 * gave the socket: 0 or -1 with errno. */
static int call_local(struct vz_app_sock *s, struct vz_ctl_msg *req)
{
	struct vz_ctl_msg rep;

	if (vz_client_call(s, req, &rep, NULL))
		return -1;
	s->ip = rep.addr;
	memcpy(s->ip6, rep.addr6, 16);
	s->port = rep.port;
	return 0;
}

int vz_poller_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_BIND };
	struct vz_app_sock *s;
	struct vz_addr a;
	int rc;
	s = sock_get(fd);

	if (!s)
		return -1;
	rc = addr_get(s, addr, len, &a);
	if (rc)
		return fail(rc);
	req_addr(&req, &a);
	return call_local(s, &req);
}

/* The kernel binds an unbound socket to an ephemeral port on its first
 * send; so do we, before the datagram reaches the ring. */
int vz_client_autobind(struct vz_app_sock *s)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };

	if (s->v6)
		return vz_bind(s->fd, (struct sockaddr *)&any6, sizeof(any6));
	return vz_bind(s->fd, (struct sockaddr *)&any, sizeof(any));
}

int vz_poller_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_CONNECT };
	struct vz_app_sock *s;
	struct vz_addr a;
	int rc;
	s = sock_get(fd);

	if (!s)
		return -1;
	if (addr && len >= sizeof(sa_family_t) &&
	    addr->sa_family == AF_UNSPEC) {
		req.opt = 1;
	} else {
		rc = addr_get(s, addr, len, &a);
		if (rc)
			return fail(rc);
		req_addr(&req, &a);
	}
	if (call_local(s, &req))
		return -1;
	s->peer_ip = req.opt ? 0 : req.addr;
	memcpy(s->peer_ip6, req.addr6, 16); /* zero when dissolved */
	s->peer_port = req.opt ? 0 : req.port;
	return 0;
}

int vz_poller_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_app_sock *s;
	static const __u8 any6[16];
	const __u8 *ip6;
	__be32 ip;
	s = sock_get(fd);

	if (!s)
		return -1;
	ip6 = s->ip6;
	/* Connected from INADDR_ANY: the kernel shows the route's source. */
	ip = s->ip || !s->peer_port ? s->ip : vz_client_ip4;
	if (s->v6 && s->peer_port && !memcmp(s->ip6, any6, 16))
		ip6 = vz_client_ip6;
	return addr_put(s, addr, len, ip, ip6, s->port) ? fail(-EFAULT) : 0;
}

int vz_poller_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_app_sock *s;
	s = sock_get(fd);

	if (!s)
		return -1;
	if (!s->peer_port)
		return fail(-ENOTCONN);
	return addr_put(s, addr, len, s->peer_ip, s->peer_ip6, s->peer_port)
		       ? fail(-EFAULT)
		       : 0;
}
