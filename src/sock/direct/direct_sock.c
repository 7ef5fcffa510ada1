// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's socket calls: socket, close, dup, bind, connect, the
 * names, the options and fcntl. A socket is a real eventfd descriptor
 * (numbers never collide with the process's; dup copies it), in a table by
 * descriptor and one by port (a SO_REUSEPORT group's first: direct_addr.c).
 * A socket counts the descriptors naming it (refs) and the calls in
 * progress on it (users): closing a descriptor another thread waits on
 * leaves that thread a live socket, which it finds closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sock/direct/direct.h"
#include "sock/direct/direct_internal.h"
#include "sock/app/busy.h"
#include "sock/app/pmtu.h"

/* ---- sockets and their descriptors ---- */

struct vz_direct_socket *vz_direct_hold(int fd)
{
	struct vz_direct_socket *s = NULL;

	if (vz_direct_forked()) {
		errno = ENOTSUP;
		return NULL;
	}
	if (fd >= 0 && fd < MAX_FD) {
		pthread_mutex_lock(&vz_direct.lock);
		s = vz_direct.by_fd[fd];
		if (s)
			s->users++;
		pthread_mutex_unlock(&vz_direct.lock);
	}
	if (!s)
		errno = EBADF;
	return s;
}

void vz_direct_watch(int fd)
{
	struct vz_direct_socket *s;

	if (fd < 0 || fd >= MAX_FD || !vz_direct_fd(fd))
		return;
	pthread_mutex_lock(&vz_direct.lock);
	s = vz_direct.by_fd[fd];
	if (s && !s->watched) {
		s->watched = true;
		/* what is queued already makes it readable now */
		if (s->head != s->tail)
			vz_direct_efd_ring(s->fd);
	}
	pthread_mutex_unlock(&vz_direct.lock);
}

int vz_direct_poll_ready(struct pollfd *fds, nfds_t n)
{
	int ready = 0;
	nfds_t i;

	pthread_mutex_lock(&vz_direct.lock);
	for (i = 0; i < n; i++) {
		struct vz_direct_socket *s;

		fds[i].revents = 0;
		if (fds[i].fd < 0)
			continue; /* poll() skips it */
		s = vz_direct.by_fd[fds[i].fd];
		if (!s)
			fds[i].revents = POLLNVAL; /* closed since the check */
		else if (s->head != s->tail)
			fds[i].revents = fds[i].events & (POLLIN | POLLRDNORM);
		/* as the eventfd's: a send never waits */
		fds[i].revents |= fds[i].events & (POLLOUT | POLLWRNORM);
		ready += !!fds[i].revents;
	}
	pthread_mutex_unlock(&vz_direct.lock);
	return ready;
}

void vz_direct_sleep(const struct pollfd *fds, nfds_t n, bool asleep)
{
	nfds_t i;

	pthread_mutex_lock(&vz_direct.lock);
	for (i = 0; i < n; i++) {
		struct vz_direct_socket *s =
			fds[i].fd >= 0 ? vz_direct.by_fd[fds[i].fd] : NULL;
		bool kept;

		if (!s)
			continue;
		kept = vz_direct_efd_kept(s);
		s->sleepers += asleep ? 1 : -1;
		if (kept == vz_direct_efd_kept(s) || s->head == s->tail)
			continue;
		/* the eventfd starts following the queue, or stops (empty) */
		if (asleep)
			vz_direct_efd_ring(s->fd);
		else
			vz_direct_efd_drain(s->fd);
	}
	pthread_mutex_unlock(&vz_direct.lock);
}

/* Under vz_direct.lock. */
static void sock_free(struct vz_direct_socket *s)
{
	while (s->head != s->tail)
		free(s->q[s->head++ % QLEN]);
	free(s);
}

void vz_direct_put(struct vz_direct_socket *s)
{
	pthread_mutex_lock(&vz_direct.lock);
	if (!--s->users && !s->refs)
		sock_free(s);
	pthread_mutex_unlock(&vz_direct.lock);
}

/* Under vz_direct.lock: fd names s no more. The last descriptor closes
 * the socket (its port is free at once, as the kernel's); its memory goes
 * with the last call holding it. True when it may be freed now. */
static bool release(int fd, struct vz_direct_socket *s)
{
	int i;

	__atomic_store_n(&vz_direct.by_fd[fd], NULL, __ATOMIC_RELEASE);
	if (--s->refs) {
		/* the engine writes s->fd: keep it one that stays open */
		for (i = 0; s->fd == fd && i <= vz_direct.max_fd; i++)
			if (vz_direct.by_fd[i] == s)
				s->fd = i;
		return false;
	}
	vz_direct_unbind_locked(s);
	return !s->users; /* the queue goes with the memory (a peek reads) */
}

/* Under vz_direct.lock. */
static void adopt(int fd, struct vz_direct_socket *s)
{
	s->refs++;
	if (fd > vz_direct.max_fd)
		vz_direct.max_fd = fd;
	__atomic_store_n(&vz_direct.by_fd[fd], s, __ATOMIC_RELEASE);
}

int vz_direct_sock_new(int domain, int type)
{
	struct vz_direct_socket *s = calloc(1, sizeof(*s));

	vz_direct_atfork();
	if (!s)
		return fail(ENOMEM);
	/* a real descriptor, so numbers never collide with the process's,
	 * and the kernel's poll, select and epoll see its readiness */
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
	s->v6 = domain == AF_INET6;
	s->v6only = s->v6 && vz_direct.v6only;
	s->busy_us = getenv("VZ_BUSY_POLL_US") ? vz_busy_default_us()
					       : DEFAULT_BUSY_US;
	pthread_mutex_lock(&vz_direct.lock);
	adopt(s->fd, s);
	pthread_mutex_unlock(&vz_direct.lock);
	return s->fd;
}

int vz_direct_socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (vz_direct_init())
		return -1;
	if (vz_direct_forked())
		return fail(ENOTSUP);
	/* without VZ_DIRECT_ADDR6 the shim leaves IPv6 to the kernel */
	if (domain != AF_INET &&
	    (domain != AF_INET6 || IN6_IS_ADDR_UNSPECIFIED(&vz_direct.ip6)))
		return fail(EAFNOSUPPORT);
	if (base != SOCK_DGRAM)
		return fail(base == SOCK_STREAM ? EPROTONOSUPPORT
						: ESOCKTNOSUPPORT);
	if (protocol && protocol != IPPROTO_UDP)
		return fail(EPROTONOSUPPORT);
	return vz_direct_sock_new(domain, type);
}

int vz_direct_close(int fd)
{
	struct vz_direct_socket *s;
	bool last;

	if (fd < 0 || fd >= MAX_FD)
		return fail(EBADF);
	if (vz_direct_forked()) {
		/* the parent's socket: the child only lets go of its copy */
		__atomic_store_n(&vz_direct.by_fd[fd], NULL, __ATOMIC_RELEASE);
		return close(fd);
	}
	pthread_mutex_lock(&vz_direct.lock);
	s = vz_direct.by_fd[fd];
	if (!s) {
		pthread_mutex_unlock(&vz_direct.lock);
		return fail(EBADF);
	}
	last = release(fd, s);
	if (last)
		sock_free(s);
	pthread_mutex_unlock(&vz_direct.lock);
	close(fd);
	return 0;
}

/* F_DUPFD, F_DUPFD_CLOEXEC: the kernel copies the eventfd (so epoll on
 * the copy is the kernel's), and the copy names the same socket. */
static int dup_min(int fd, int cmd, int min)
{
	struct vz_direct_socket *s = hold(fd);
	int nfd, err = 0;

	if (!s)
		return -1;
	nfd = fcntl(fd, cmd, min);
	if (nfd < 0) {
		put(s);
		return -1;
	}
	pthread_mutex_lock(&vz_direct.lock);
	if (nfd >= MAX_FD)
		err = EMFILE;
	else if (vz_direct.by_fd[fd] != s)
		err = EBADF; /* closed meanwhile */
	else
		adopt(nfd, s);
	pthread_mutex_unlock(&vz_direct.lock);
	put(s);
	if (err) {
		close(nfd);
		return fail(err);
	}
	return nfd;
}

/* dup2, dup3 where either side is a direct socket: newfd becomes a copy
 * of oldfd (a direct socket's or a kernel descriptor), and a direct socket
 * newfd named loses that descriptor first, as dup2 closes it. */
int vz_direct_dup3(int oldfd, int newfd, int flags)
{
	struct vz_direct_socket *so, *sn;
	bool gone = false;

	if (vz_direct_forked())
		return fail(ENOTSUP);
	if (newfd < 0)
		return fail(EBADF);
	pthread_mutex_lock(&vz_direct.lock);
	so = oldfd >= 0 && oldfd < MAX_FD ? vz_direct.by_fd[oldfd] : NULL;
	sn = newfd < MAX_FD ? vz_direct.by_fd[newfd] : NULL;
	if (so && newfd >= MAX_FD) {
		pthread_mutex_unlock(&vz_direct.lock);
		return fail(EMFILE);
	}
	/* under the lock: the engine never writes a descriptor in flux */
	if (dup3(oldfd, newfd, flags) < 0) {
		pthread_mutex_unlock(&vz_direct.lock);
		return -1;
	}
	if (sn)
		gone = release(newfd, sn);
	if (so)
		adopt(newfd, so);
	if (gone)
		sock_free(sn);
	pthread_mutex_unlock(&vz_direct.lock);
	return newfd;
}

static int bind_on(struct vz_direct_socket *s, const struct sockaddr *addr,
		   socklen_t len)
{
	struct in6_addr ip;
	__be16 port;
	int rc;

	rc = vz_direct_addr_get(s, addr, len, DS_BIND, &ip, &port);
	if (rc)
		return fail(rc);
	pthread_mutex_lock(&vz_direct.lock);
	rc = vz_direct_bind_locked(s, &ip, ntohs(port));
	pthread_mutex_unlock(&vz_direct.lock);
	return rc ? fail(rc) : 0;
}

static int connect_on(struct vz_direct_socket *s, const struct sockaddr *addr,
		      socklen_t len)
{
	struct in6_addr ip;
	__be16 port;
	int rc = 0;

	if (addr && len >= sizeof(sa_family_t) &&
	    addr->sa_family == AF_UNSPEC) {
		memset(&s->peer_ip, 0, sizeof(s->peer_ip));
		s->peer_port = 0;
		return 0;
	}
	rc = vz_direct_addr_get(s, addr, len, DS_CONNECT, &ip, &port);
	if (rc)
		return fail(rc);
	if (!port)
		return fail(EINVAL);
	pthread_mutex_lock(&vz_direct.lock);
	if (!s->port)
		rc = vz_direct_bind_locked(s, NULL, 0);
	if (!rc && !(s->tables & (in6_mapped(&ip) ? ON4 : ON6)))
		rc = ENETUNREACH; /* bound to the other family's address */
	if (!rc) {
		s->peer_ip = ip;
		s->peer_port = port;
	}
	pthread_mutex_unlock(&vz_direct.lock);
	return rc ? fail(rc) : 0;
}

static int getsockname_on(struct vz_direct_socket *s, struct sockaddr *addr,
			  socklen_t *len)
{
	struct in6_addr ip = s->ip;

	/* connected from any address: the one its datagrams leave from */
	if (in6_any(&ip) && s->peer_port)
		ip = in6_mapped(&s->peer_ip) ? in6_map(vz_direct.ip4)
					     : vz_direct.ip6;
	return vz_direct_addr_put(s, addr, len, &ip, s->port);
}

static int getpeername_on(struct vz_direct_socket *s, struct sockaddr *addr,
			  socklen_t *len)
{
	if (!s->peer_port)
		return fail(ENOTCONN);
	return vz_direct_addr_put(s, addr, len, &s->peer_ip, s->peer_port);
}

/* ---- options, poll ---- */

static int set_timeo(struct vz_direct_socket *s, int name, const void *val,
		     socklen_t len)
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
static int set_int(struct vz_direct_socket *s, int name, int v)
{
	switch (name) {
	case SO_BUSY_POLL:
		if (v < 0 || (__u32)v > VZ_BUSY_POLL_MAX_US)
			return fail(EINVAL);
		s->busy_us = (__u32)v;
		return 0;
	case SO_REUSEPORT: /* groups: direct_addr.c */
		s->reuseport = v != 0;
		return 0;
	case SO_REUSEADDR: /* a port's second socket needs SO_REUSEPORT */
	case SO_RCVBUF:
	case SO_SNDBUF:
		return 0;
	default:
		return fail(ENOPROTOOPT);
	}
}

/* IP_MTU_DISCOVER; on an AF_INET6 socket also IPV6_MTU_DISCOVER (the
 * first then governs its IPv4, as Linux's). */
static bool pmtu_opt(const struct vz_direct_socket *s, int level, int name)
{
	return vz_pmtu_opt(false, level, name) ||
	       (s->v6 && vz_pmtu_opt(true, level, name));
}

/* IPV6_V6ONLY: only before bind, as Linux (an unbound socket is in no
 * port table yet). */
static int set_v6only(struct vz_direct_socket *s, const void *val,
		      socklen_t len)
{
	int v, rc = 0;

	if (!val)
		return fail(EFAULT);
	if (len < sizeof(int))
		return fail(EINVAL);
	memcpy(&v, val, sizeof(v));
	pthread_mutex_lock(&vz_direct.lock);
	if (s->port)
		rc = EINVAL;
	else
		s->v6only = v != 0;
	pthread_mutex_unlock(&vz_direct.lock);
	return rc ? fail(rc) : 0;
}

static int setsockopt_on(struct vz_direct_socket *s, int level, int name,
			 const void *val, socklen_t len)
{
	int v;

	if (pmtu_opt(s, level, name)) {
		int err = vz_pmtu_set(val, len);

		return err ? fail(-err) : 0;
	}
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		return set_v6only(s, val, len);
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

static int getsockopt_on(struct vz_direct_socket *s, int level, int name,
			 void *val, socklen_t *len)
{

	if (pmtu_opt(s, level, name)) {
		int err = vz_pmtu_get(val, len);

		return err ? fail(-err) : 0;
	}
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		return !val || !len ? fail(EFAULT)
				    : put_int(val, len, s->v6only);
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
		return put_int(val, len, s->v6 ? AF_INET6 : AF_INET);
	case SO_PROTOCOL:
		return put_int(val, len, IPPROTO_UDP);
	case SO_ERROR:
		return put_int(val, len, 0);
	case SO_REUSEPORT:
		return put_int(val, len, s->reuseport);
	case SO_RCVBUF:
	case SO_SNDBUF:
		return put_int(val, len, QLEN * 2048);
	default:
		return fail(ENOPROTOOPT);
	}
}

static int fcntl_on(int fd, struct vz_direct_socket *s, int cmd, int arg)
{
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		s->nonblock = arg & O_NONBLOCK;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return fcntl(fd, cmd, arg);
	default:
		return fail(EINVAL);
	}
}

/* ---- the calls, each on a held socket ---- */

int vz_direct_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = bind_on(s, addr, len);
	put(s);
	return rc;
}

int vz_direct_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = connect_on(s, addr, len);
	put(s);
	return rc;
}

int vz_direct_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = getsockname_on(s, addr, len);
	put(s);
	return rc;
}

int vz_direct_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = getpeername_on(s, addr, len);
	put(s);
	return rc;
}

int vz_direct_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = setsockopt_on(s, level, name, val, len);
	put(s);
	return rc;
}

int vz_direct_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct vz_direct_socket *s = hold(fd);
	int rc;

	if (!s)
		return -1;
	rc = getsockopt_on(s, level, name, val, len);
	put(s);
	return rc;
}

int vz_direct_fcntl(int fd, int cmd, int arg)
{
	struct vz_direct_socket *s;
	int rc;

	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return dup_min(fd, cmd, arg);
	s = hold(fd);
	if (!s)
		return -1;
	rc = fcntl_on(fd, s, cmd, arg);
	put(s);
	return rc;
}
