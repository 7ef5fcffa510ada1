// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's socket calls: socket, close, bind, connect, the names,
 * the options and fcntl. A socket is a real eventfd descriptor (numbers
 * never collide with the process's), in a table by descriptor and one by
 * port (one socket per port: no SO_REUSEPORT groups here).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sock/direct/direct.h"
#include "sock/direct/dsock.h"
#include "sock/lib/busy.h"
#include "sock/lib/pmtu.h"

/* ---- sockets ---- */

int vz_direct_socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct dsock *s;

	if (vz_direct_init())
		return -1;
	if (domain != AF_INET)
		return fail(EAFNOSUPPORT);
	if (base != SOCK_DGRAM)
		return fail(base == SOCK_STREAM ? EPROTONOSUPPORT
						: ESOCKTNOSUPPORT);
	if (protocol && protocol != IPPROTO_UDP)
		return fail(EPROTONOSUPPORT);
	s = calloc(1, sizeof(*s));
	if (!s)
		return fail(ENOMEM);
	/* a real descriptor, so numbers never collide with the process's */
	s->fd = eventfd(0,
			EFD_NONBLOCK | (type & SOCK_CLOEXEC ? EFD_CLOEXEC : 0));
	if (s->fd < 0 || s->fd >= MAX_FD) {
		int e = s->fd < 0 ? errno : EMFILE;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return fail(e);
	}
	s->nonblock = type & SOCK_NONBLOCK;
	s->busy_us = getenv("VZ_BUSY_POLL_US") ? vz_busy_default_us()
					       : DEFAULT_BUSY_US;
	pthread_mutex_lock(&vz_direct.lock);
	__atomic_store_n(&vz_direct.by_fd[s->fd], s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vz_direct.lock);
	return s->fd;
}

int vz_direct_close(int fd)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	pthread_mutex_lock(&vz_direct.lock);
	if (s->port && vz_direct.by_port[ntohs(s->port)] == s)
		vz_direct.by_port[ntohs(s->port)] = NULL;
	__atomic_store_n(&vz_direct.by_fd[fd], NULL, __ATOMIC_RELEASE);
	while (s->head != s->tail)
		free(s->q[s->head++ % QLEN]);
	pthread_mutex_unlock(&vz_direct.lock);
	close(fd);
	free(s);
	return 0;
}

int vz_direct_sin_get(const struct sockaddr *sa, socklen_t len,
		      struct sockaddr_in *sin)
{
	if (!sa)
		return EFAULT;
	if (len < sizeof(*sin))
		return EINVAL;
	memcpy(sin, sa, sizeof(*sin));
	return sin->sin_family == AF_INET ? 0 : EAFNOSUPPORT;
}

int vz_direct_sin_put(struct sockaddr *sa, socklen_t *len, __be32 ip,
		      __be16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = port };

	if (!sa || !len)
		return fail(EFAULT);
	memcpy(sa, &sin, *len < sizeof(sin) ? *len : sizeof(sin));
	*len = sizeof(sin);
	return 0;
}

/* Under vz_direct.lock. One socket per port: no SO_REUSEPORT groups here. */
int vz_direct_bind_locked(struct dsock *s, __be32 ip, __u16 port)
{
	unsigned int i;

	if (s->port)
		return EINVAL;
	if (ip && ip != vz_direct.ip4)
		return EADDRNOTAVAIL;
	if (!port) {
		for (i = 0; i <= EPH_HI - EPH_LO; i++) {
			__u16 p =
				(__u16)(EPH_LO + vz_direct.eph_next++ %
							 (EPH_HI - EPH_LO + 1));

			if (!vz_direct.by_port[p]) {
				port = p;
				break;
			}
		}
		if (!port)
			return EADDRINUSE;
	} else if (vz_direct.by_port[port]) {
		return EADDRINUSE;
	}
	s->ip = ip;
	s->port = htons(port);
	vz_direct.by_port[port] = s;
	return 0;
}

int vz_direct_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct dsock *s = get(fd);
	struct sockaddr_in sin;
	int rc;

	if (!s)
		return -1;
	rc = vz_direct_sin_get(addr, len, &sin);
	if (rc)
		return fail(rc);
	pthread_mutex_lock(&vz_direct.lock);
	rc = vz_direct_bind_locked(s, sin.sin_addr.s_addr, ntohs(sin.sin_port));
	pthread_mutex_unlock(&vz_direct.lock);
	return rc ? fail(rc) : 0;
}

int vz_direct_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct dsock *s = get(fd);
	struct sockaddr_in sin;
	int rc = 0;

	if (!s)
		return -1;
	if (addr && len >= sizeof(sa_family_t) &&
	    addr->sa_family == AF_UNSPEC) {
		s->peer_ip = 0;
		s->peer_port = 0;
		return 0;
	}
	rc = vz_direct_sin_get(addr, len, &sin);
	if (rc)
		return fail(rc);
	if (!sin.sin_port)
		return fail(EINVAL);
	pthread_mutex_lock(&vz_direct.lock);
	if (!s->port)
		rc = vz_direct_bind_locked(s, 0, 0);
	if (!rc) {
		s->peer_ip = sin.sin_addr.s_addr;
		s->peer_port = sin.sin_port;
	}
	pthread_mutex_unlock(&vz_direct.lock);
	return rc ? fail(rc) : 0;
}

int vz_direct_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	return vz_direct_sin_put(addr, len,
				 s->ip || !s->peer_port ? s->ip : vz_direct.ip4,
				 s->port);
}

int vz_direct_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	if (!s->peer_port)
		return fail(ENOTCONN);
	return vz_direct_sin_put(addr, len, s->peer_ip, s->peer_port);
}

/* ---- options, poll ---- */

static int set_timeo(struct dsock *s, int name, const void *val, socklen_t len)
{
	struct timeval t;

	if (len < sizeof(t))
		return fail(EINVAL);
	memcpy(&t, val, sizeof(t));
	if (t.tv_usec < 0 || t.tv_usec >= 1000000)
		return fail(EDOM);
	if (name == SO_RCVTIMEO)
		s->rcvtimeo = t;
	return 0; /* a send never waits here */
}

/* SOL_SOCKET options that take an int. */
static int set_int(struct dsock *s, int name, int v)
{
	switch (name) {
	case SO_BUSY_POLL:
		if (v < 0 || (__u32)v > VZ_BUSY_POLL_MAX_US)
			return fail(EINVAL);
		s->busy_us = (__u32)v;
		return 0;
	case SO_REUSEADDR:
	case SO_REUSEPORT: /* knotd sets it even for one worker */
	case SO_RCVBUF:
	case SO_SNDBUF:
		/* accepted; one socket per port here: a second bind to a
		 * port, SO_REUSEPORT or not, is EADDRINUSE */
		return 0;
	default:
		return fail(ENOPROTOOPT);
	}
}

int vz_direct_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct dsock *s = get(fd);
	int v;

	if (!s)
		return -1;
	if (vz_pmtu_opt(false, level, name)) {
		int err = vz_pmtu_set(val, len);

		return err ? fail(-err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(ENOPROTOOPT);
	if (!val)
		return fail(EFAULT);
	if (name == SO_RCVTIMEO || name == SO_SNDTIMEO)
		return set_timeo(s, name, val, len);
	if (len < sizeof(int))
		return fail(EINVAL);
	memcpy(&v, val, sizeof(v));
	return set_int(s, name, v);
}

static int put_int(void *val, socklen_t *len, int v)
{
	if (*len < sizeof(int))
		return fail(EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

int vz_direct_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	if (vz_pmtu_opt(false, level, name)) {
		int err = vz_pmtu_get(val, len);

		return err ? fail(-err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(ENOPROTOOPT);
	if (!val || !len)
		return fail(EFAULT);
	switch (name) {
	case SO_BUSY_POLL:
		return put_int(val, len, (int)s->busy_us);
	case SO_TYPE:
		return put_int(val, len, SOCK_DGRAM);
	case SO_DOMAIN:
		return put_int(val, len, AF_INET);
	case SO_PROTOCOL:
		return put_int(val, len, IPPROTO_UDP);
	case SO_ERROR:
		return put_int(val, len, 0);
	case SO_RCVBUF:
	case SO_SNDBUF:
		return put_int(val, len, QLEN * 2048);
	default:
		return fail(ENOPROTOOPT);
	}
}

int vz_direct_fcntl(int fd, int cmd, int arg)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		s->nonblock = arg & O_NONBLOCK;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return fcntl(fd, cmd, arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return fail(EOPNOTSUPP); /* no copies of a direct socket */
	default:
		return fail(EINVAL);
	}
}
