// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock's data path: sendto writes the socket's transmit ring and
 * recvfrom reads its receive ring (ring.h), each under the socket's lock
 * for that ring (uncontended but for threads sharing a socket); datagrams
 * never cross the control connection. A caller that
 * must wait sets the ring's `waiting` word, re-checks the ring and sleeps
 * in poll() on the socket's eventfd, which the poller writes only when it
 * finds the word set: no system call per datagram otherwise.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>

#include "sock/app/busy.h"
#include "sock/app/app_internal.h"
#include "sock/stack/stack.h"
#include "veloz/sock.h"

/* A deadline from SO_RCVTIMEO/SO_SNDTIMEO: -1 is none (0 there means
 * forever, as in the kernel). */
static __s64 deadline(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	if (tv->tv_sec < 0)
		return (__s64)vz_now_ns();
	return (__s64)vz_now_ns() + (__s64)tv->tv_sec * 1000000000 +
	       (__s64)tv->tv_usec * 1000;
}

static bool rx_ready(const struct vz_app_sock *s)
{
	return vz_ring_readable(&s->rx) ||
	       __atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE);
}

/*
 * Sleep until the ring may have changed (ready() true) or the deadline:
 * 0, or -EAGAIN at the deadline, -EINTR on a signal. The fence pairs with
 * the poller's vz_wake(): it sees `waiting` or we see its index.
 */
struct ring_wait {
	const struct vz_app_sock *s;
	bool (*ready)(const struct vz_app_sock *, size_t);
	size_t arg;
};

static bool ring_wait_ready(const void *arg)
{
	const struct ring_wait *w = arg;

	return w->ready(w->s, w->arg);
}

static int wait_ring(struct vz_app_sock *s, struct vz_ring_ctl *c,
		     bool (*ready)(const struct vz_app_sock *, size_t),
		     size_t arg, __s64 until)
{
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	struct ring_wait w = { s, ready, arg };
	int ms, rc = 0;

	/* SO_BUSY_POLL: the poller may answer before a sleep would pay. */
	if (s->busy_us && vz_busy_spin(ring_wait_ready, &w, s->busy_us, until))
		return 0;
	__atomic_store_n(&c->waiting, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ready(s, arg)) {
		ms = ms_left(until);
		if (!ms)
			rc = -EAGAIN;
		else if (vz_client_libc.poll(&p, 1, ms) < 0)
			rc = -errno;
		if (__atomic_load_n(&s->closed, __ATOMIC_ACQUIRE))
			rc = -EBADF; /* closed by another thread: its fd is gone
				      */
		else
			eventfd_drain(s->fd);
	}
	__atomic_store_n(&c->waiting, 0, __ATOMIC_RELAXED);
	return rc;
}

static bool rx_ready_arg(const struct vz_app_sock *s, size_t unused)
{
	(void)unused;
	return rx_ready(s);
}

static bool tx_ready(const struct vz_app_sock *s, size_t len)
{
	return vz_ring_can_reserve(&s->tx, len);
}

/* ---- datagrams ---- */

/*
 * The poller sleeps once idle for its busy-poll time (an idle stack costs
 * no CPU); it then asks to be woken, as AF_XDP's need_wakeup does. The
 * fence pairs with the poller's: it sees our record or we see its word.
 * One write wakes it for every socket; a burst pays it at most once.
 */
static void ring_doorbell(struct vz_app_sock *s)
{
	static const __u64 one = 1;
	int fd;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&s->shm->poller_asleep, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&s->shm->poller_asleep, 0, __ATOMIC_ACQ_REL))
		return;
	fd = __atomic_load_n(&vz_client_doorbell, __ATOMIC_RELAXED);
	if (fd >= 0 && vz_client_libc.write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the poller is awake */
	}
}

static int send_dest(const struct vz_app_sock *s, const struct sockaddr *to,
		     socklen_t tolen, struct vz_addr *a)
{
	int rc;

	if (!to) {
		if (!s->peer_port)
			return -EDESTADDRREQ;
		memset(a, 0, sizeof(*a));
		a->ip = s->peer_ip;
		memcpy(a->ip6, s->peer_ip6, 16);
		a->port = s->peer_port;
		return 0;
	}
	rc = addr_get(s, to, tolen, a);
	if (rc)
		return rc;
	return a->port ? 0 : -EINVAL;
}

/* What is refused before the ring is looked at: 0 or -errno. a: the
 * IPv6 address in front of the datagram (0 for AF_INET). */
static inline int send_check(const struct vz_app_sock *s, const void *buf,
			     size_t len, int flags, size_t a)
{
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	if (len > VZ_STACK_MAX_UDP || vz_ring_need(a + len) > s->tx.size)
		return -EMSGSIZE;
	if (len && !buf)
		return -EFAULT;
	return 0;
}

/* Room for a record of `need` bytes on the transmit ring, waiting as the
 * socket allows: the record, with tx_lock held until its commit, or NULL
 * with *rc a -errno. */
static inline struct vz_ring_rec *send_reserve(struct vz_app_sock *s,
					       size_t need, int flags, int *rc)
{
	struct vz_ring_rec *rec;
	__s64 until = -2;

	for (;;) {
		pthread_mutex_lock(&s->tx_lock);
		rec = vz_ring_reserve(&s->tx, need);
		if (rec)
			break;
		pthread_mutex_unlock(&s->tx_lock);
		if (s->nonblock || (flags & MSG_DONTWAIT)) {
			*rc = -EAGAIN;
			return NULL;
		}
		if (until == -2)
			until = deadline(&s->sndtimeo);
		*rc = wait_ring(s, &s->shm->tx, tx_ready, need, until);
		if (*rc)
			return NULL;
	}
	return rec;
}

/* sendto on a held socket (sock_hold): the length sent, or -errno. */
static ssize_t send_held(struct vz_app_sock *s, const void *buf, size_t len,
			 int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct vz_ring_rec *rec;
	struct vz_addr sin;
	size_t a = s->v6 ? VZ_RING_ADDR6 : 0; /* the IPv6 address in front */
	int rc;

	rc = send_check(s, buf, len, flags, a);
	if (!rc)
		rc = send_dest(s, to, tolen, &sin);
	if (!rc)
		rc = -take_error(s);
	if (rc)
		return rc;
	if (!s->port && vz_client_autobind(s))
		return -errno;
	rec = send_reserve(s, a + len, flags, &rc);
	if (!rec)
		return rc;
	rec->len = (__u32)(a + len);
	rec->flags = a ? VZ_RING_F_V6 : 0;
	rec->addr = sin.ip;
	rec->port = sin.port;
	rec->reserved = 0;
	if (a)
		memcpy(rec + 1, sin.ip6, a);
	if (len)
		memcpy((__u8 *)(rec + 1) + a, buf, len);
	vz_ring_commit(&s->tx, a + len);
	pthread_mutex_unlock(&s->tx_lock);
	ring_doorbell(s);
	return (ssize_t)len;
}

ssize_t vz_poller_sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *to, socklen_t tolen)
{
	struct vz_app_sock *s;
	ssize_t rc;
	s = sock_hold(fd);

	if (!s)
		return -1;
	rc = send_held(s, buf, len, flags, to, tolen);
	vz_client_put(s);
	return rc < 0 ? fail((int)rc) : rc;
}

ssize_t vz_send(int fd, const void *buf, size_t len, int flags)
{
	return vz_sendto(fd, buf, len, flags, NULL, 0);
}

/* The next datagram's header and bytes, waiting if allowed: 1 with
 * rx_lock held until the record is released, or -errno (including a
 * pending SO_ERROR once the ring is empty). */
static int recv_next(struct vz_app_sock *s, int flags, struct vz_ring_rec *rec,
		     const __u8 **payload)
{
	__s64 until = -2;
	int rc;

	for (;;) {
		pthread_mutex_lock(&s->rx_lock);
		rc = vz_ring_peek(&s->rx, rec, payload);
		if (rc > 0)
			return 1;
		pthread_mutex_unlock(&s->rx_lock);
		if (rc < 0)
			return -EIO; /* the poller wrote garbage */
		if (__atomic_load_n(&s->closed, __ATOMIC_ACQUIRE))
			return -EBADF;
		rc = take_error(s);
		if (rc)
			return -rc;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		if (until == -2)
			until = deadline(&s->rcvtimeo);
		rc = wait_ring(s, &s->shm->rx, rx_ready_arg, 0, until);
		if (rc)
			return rc;
	}
}

/* recvfrom on a held socket (sock_hold): the length, or -errno. */
static ssize_t recv_held(struct vz_app_sock *s, void *buf, size_t len,
			 int flags, struct sockaddr *from, socklen_t *fromlen)
{
	struct vz_ring_rec rec = { 0 };
	const __u8 *payload = NULL;
	size_t n, a, dlen;
	int rc;

	if (flags & (MSG_OOB | MSG_ERRQUEUE))
		return -EOPNOTSUPP;
	if (len && !buf)
		return -EFAULT;
	rc = recv_next(s, flags, &rec, &payload);
	if (rc < 0)
		return rc;
	/* An AF_INET6 socket's datagram opens with its sender's address. */
	a = s->v6 ? VZ_RING_ADDR6 : 0;
	if (!!(rec.flags & VZ_RING_F_V6) != s->v6 || rec.len < a) {
		pthread_mutex_unlock(&s->rx_lock);
		return -EIO; /* the poller wrote garbage */
	}
	dlen = rec.len - a;
	n = dlen < len ? dlen : len;
	if (n) /* buf may be NULL when len is 0 */
		memcpy(buf, payload + a, n);
	if (from && fromlen)
		addr_put(s, from, fromlen, rec.addr, payload, rec.port);
	if (!(flags & MSG_PEEK))
		vz_ring_release(&s->rx, rec.len);
	pthread_mutex_unlock(&s->rx_lock);
	return (ssize_t)((flags & MSG_TRUNC) ? dlen : n);
}

ssize_t vz_poller_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *from, socklen_t *fromlen)
{
	struct vz_app_sock *s;
	ssize_t rc;
	s = sock_hold(fd);

	if (!s)
		return -1;
	rc = recv_held(s, buf, len, flags, from, fromlen);
	vz_client_put(s);
	return rc < 0 ? fail((int)rc) : rc;
}

ssize_t vz_recv(int fd, void *buf, size_t len, int flags)
{
	return vz_recvfrom(fd, buf, len, flags, NULL, NULL);
}
