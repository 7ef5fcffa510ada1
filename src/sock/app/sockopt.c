// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: setsockopt and getsockopt. Most options live in
 * the library (timeouts, SO_BUSY_POLL, the path MTU options of pmtu.h);
 * SO_REUSEADDR, SO_REUSEPORT and the buffer sizes are the poller's, which
 * may hand back bigger rings.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "sock/app/busy.h"
#include "sock/app/app_internal.h"
#include "sock/app/pmtu.h"
#include "sock/ring/proto.h"
#include "veloz/sock.h"

static int setopt_remote(struct vz_app_sock *s, int name, __u32 val)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_SETOPT,
				  .opt = (__u32)name,
				  .val = val },
			  rep;
	int memfd = -1, rc = 0;

	if (vz_client_call(s, &req, &rep, &memfd)) {
		if (memfd >= 0)
			vz_client_libc.close(memfd);
		return -1;
	}
	if (rep.flags & VZ_CTL_F_SHM)
		rc = memfd < 0
			     ? -EPROTO
			     : vz_client_map(s, memfd, rep.rcvbuf, rep.sndbuf);
	if (memfd >= 0)
		vz_client_libc.close(memfd);
	return rc ? fail(rc) : 0;
}

static int set_timeout(struct timeval *tv, const void *val, socklen_t len)
{
	struct timeval t;

	if (len < sizeof(t))
		return fail(-EINVAL);
	memcpy(&t, val, sizeof(t));
	if (t.tv_usec < 0 || t.tv_usec >= 1000000)
		return fail(-EDOM);
	*tv = t;
	return 0;
}

/* IPV6_V6ONLY: AF_INET6 sockets here are IPv6-only; that cannot change. */
static int set_v6only(const void *val, socklen_t len)
{
	int v;

	if (!val || len < sizeof(int))
		return fail(!val ? -EFAULT : -EINVAL);
	memcpy(&v, val, sizeof(v));
	return v ? 0 : fail(-EOPNOTSUPP);
}

/* setsockopt(SOL_SOCKET) of an int: SO_BUSY_POLL here, the rest the
 * poller's. */
static int set_int(struct vz_app_sock *s, int name, int v)
{
	switch (name) {
	case SO_BUSY_POLL:
		/* Linux: negative is EINVAL; our bound keeps a spin sane */
		if (v < 0 || (__u32)v > VZ_BUSY_POLL_MAX_US)
			return fail(-EINVAL);
		s->busy_us = (__u32)v;
		return 0;
	case SO_REUSEADDR:
	case SO_REUSEPORT:
		if (setopt_remote(s, name, v != 0))
			return -1;
		if (name == SO_REUSEADDR)
			s->reuseaddr = v != 0;
		else
			s->reuseport = v != 0;
		return 0;
	case SO_RCVBUF:
	case SO_SNDBUF:
		return setopt_remote(s, name, v < 0 ? 0 : (__u32)v);
	default:
		return fail(-ENOPROTOOPT);
	}
}

int vz_poller_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct vz_app_sock *s;
	int v;
	s = sock_get(fd);

	if (!s)
		return -1;
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		return set_v6only(val, len);
	if (vz_pmtu_opt(s->v6, level, name)) {
		int err = vz_pmtu_set(val, len);

		return err ? fail(err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(-ENOPROTOOPT);
	if (!val)
		return fail(-EFAULT);
	if (name == SO_RCVTIMEO)
		return set_timeout(&s->rcvtimeo, val, len);
	if (name == SO_SNDTIMEO)
		return set_timeout(&s->sndtimeo, val, len);
	if (len < sizeof(int))
		return fail(-EINVAL);
	memcpy(&v, val, sizeof(v));
	return set_int(s, name, v);
}

static int put_int(void *val, socklen_t *len, int v)
{
	if (*len < sizeof(int))
		return fail(-EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

static int put_timeval(void *val, socklen_t *len, const struct timeval *tv)
{
	if (*len < sizeof(*tv))
		return fail(-EINVAL);
	memcpy(val, tv, sizeof(*tv));
	*len = sizeof(*tv);
	return 0;
}

/* getsockopt(SOL_SOCKET): from the socket; SO_ERROR takes the pending
 * error. */
static int get_sol_socket(struct vz_app_sock *s, int name, void *val,
			  socklen_t *len)
{
	switch (name) {
	case SO_RCVBUF:
		return put_int(val, len, (int)s->rx.size);
	case SO_SNDBUF:
		return put_int(val, len, (int)s->tx.size);
	case SO_REUSEADDR:
		return put_int(val, len, s->reuseaddr);
	case SO_REUSEPORT:
		return put_int(val, len, s->reuseport);
	case SO_TYPE:
		return put_int(val, len, SOCK_DGRAM);
	case SO_DOMAIN:
		return put_int(val, len, s->v6 ? AF_INET6 : AF_INET);
	case SO_PROTOCOL:
		return put_int(val, len, IPPROTO_UDP);
	case SO_ERROR:
		if (*len < sizeof(int))
			return fail(-EINVAL);
		return put_int(val, len, take_error(s));
	case SO_RCVTIMEO:
		return put_timeval(val, len, &s->rcvtimeo);
	case SO_BUSY_POLL:
		return put_int(val, len, (int)s->busy_us);
	case SO_SNDTIMEO:
		return put_timeval(val, len, &s->sndtimeo);
	default:
		return fail(-ENOPROTOOPT);
	}
}

int vz_poller_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct vz_app_sock *s;
	s = sock_get(fd);

	if (!s)
		return -1;
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		return !val || !len ? fail(-EFAULT) : put_int(val, len, 1);
	if (vz_pmtu_opt(s->v6, level, name)) {
		int err = vz_pmtu_get(val, len);

		return err ? fail(err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(-ENOPROTOOPT);
	if (!val || !len)
		return fail(-EFAULT);
	return get_sol_socket(s, name, val, len);
}
