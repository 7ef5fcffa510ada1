// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: the message calls (vz_sendmsg, vz_recvmsg, vz_sendmmsg,
 * vz_recvmmsg), on top of vz_sendto and vz_recvfrom.
 *
 * A datagram is one contiguous record on a ring, so an iovec of more than
 * one part is gathered into (scattered from) a per-thread bounce buffer.
 * A burst costs no more than its datagrams: each is one ring record, the
 * poller drains up to its budget of them in one round and kicks the port
 * once for all of them.
 *
 * Vectors come from the caller and are checked as Linux checks them: a
 * NULL vector or iovec where entries are claimed is EFAULT, more than
 * UIO_MAXIOV iovec entries or more bytes than a UDP datagram holds is
 * EMSGSIZE, a length sum that overflows is EINVAL; vlen is capped at
 * UIO_MAXIOV (as the kernel does), and vlen 0 does nothing.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock/app/clock.h"
#include "sock/stack/stack.h"
#include "sock/app/mode.h"
#include "veloz/sock.h"

#ifndef UIO_MAXIOV
#define UIO_MAXIOV 1024
#endif

static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static __thread char *bounce;

static void bounce_key_make(void)
{
	pthread_key_create(&bounce_key, free);
}

/* The thread's 64 KiB buffer, freed when the thread exits. */
static char *bounce_get(void)
{
	if (bounce)
		return bounce;
	pthread_once(&bounce_once, bounce_key_make);
	bounce = malloc(VZ_STACK_MAX_UDP + 1);
	if (!bounce) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_setspecific(bounce_key, bounce);
	return bounce;
}

/* The bytes an iovec holds: 0 or -errno (Linux's checks, in its order). */
static int iov_check(const struct msghdr *m, size_t *total)
{
	size_t sum = 0, i;

	if (m->msg_iovlen > UIO_MAXIOV)
		return -EMSGSIZE;
	if (m->msg_iovlen && !m->msg_iov)
		return -EFAULT;
	for (i = 0; i < m->msg_iovlen; i++) {
		size_t len = m->msg_iov[i].iov_len;

		if (len > SSIZE_MAX || sum > SSIZE_MAX - len)
			return -EINVAL;
		if (len && !m->msg_iov[i].iov_base)
			return -EFAULT;
		sum += len;
	}
	*total = sum;
	return 0;
}

static ssize_t fail(int rc)
{
	errno = -rc;
	return -1;
}

ssize_t vz_sendmsg(int fd, const struct msghdr *m, int flags)
{
	size_t total, off = 0, i;
	char *buf;
	int rc;

	if (!m)
		return fail(-EFAULT);
	rc = iov_check(m, &total);
	if (rc)
		return fail(rc);
	if (m->msg_controllen)
		return fail(-EOPNOTSUPP); /* no ancillary data on veloz */
	if (m->msg_iovlen <= 1)
		return vz_sendto(fd,
				 m->msg_iovlen ? m->msg_iov[0].iov_base : NULL,
				 total, flags, m->msg_name, m->msg_namelen);
	if (total > VZ_STACK_MAX_UDP)
		return fail(-EMSGSIZE);
	buf = bounce_get();
	if (!buf)
		return -1;
	for (i = 0; i < m->msg_iovlen; i++) {
		if (m->msg_iov[i].iov_len)
			memcpy(buf + off, m->msg_iov[i].iov_base,
			       m->msg_iov[i].iov_len);
		off += m->msg_iov[i].iov_len;
	}
	return vz_sendto(fd, buf, total, flags, m->msg_name, m->msg_namelen);
}

/* Where a datagram for m lands: its one iovec directly, else the
 * thread's bounce buffer (NULL with errno without memory). */
static char *recv_buf(struct msghdr *m, char *none, size_t *cap)
{
	*cap = 0;
	if (m->msg_iovlen > 1) {
		*cap = VZ_STACK_MAX_UDP + 1;
		return bounce_get();
	}
	if (m->msg_iovlen && m->msg_iov[0].iov_base) {
		*cap = m->msg_iov[0].iov_len;
		return m->msg_iov[0].iov_base;
	}
	return none; /* no iovec: 0 bytes, to a valid address */
}

/* Scatter n bytes of the bounce buffer over m's iovec: the bytes that
 * fit. */
static size_t scatter(struct msghdr *m, const char *buf, size_t n)
{
	size_t off = 0, i;

	for (i = 0; i < m->msg_iovlen && off < n; i++) {
		size_t k = m->msg_iov[i].iov_len;

		if (k > n - off)
			k = n - off;
		if (k)
			memcpy(m->msg_iov[i].iov_base, buf + off, k);
		off += k;
	}
	return off;
}

/* MSG_TRUNC from the library gives the datagram's whole length, so
 * truncation shows even when one iovec takes the bytes directly. */
ssize_t vz_recvmsg(int fd, struct msghdr *m, int flags)
{
	socklen_t namelen;
	char none, *buf;
	size_t total, cap, off;
	ssize_t n;
	int rc;

	if (!m)
		return fail(-EFAULT);
	rc = iov_check(m, &total);
	if (rc)
		return fail(rc);
	namelen = m->msg_namelen;
	buf = recv_buf(m, &none, &cap);
	if (!buf)
		return -1;
	n = vz_recvfrom(fd, buf, cap, flags | MSG_TRUNC,
			m->msg_name ? m->msg_name : NULL,
			m->msg_name ? &namelen : NULL);
	if (n < 0)
		return -1;
	if (m->msg_iovlen <= 1)
		off = (size_t)n < cap ? (size_t)n : cap;
	else
		off = scatter(m, buf, (size_t)n);
	m->msg_namelen = m->msg_name ? namelen : 0;
	m->msg_controllen = 0;
	m->msg_flags = off < (size_t)n ? MSG_TRUNC : 0;
	return (flags & MSG_TRUNC) ? n : (ssize_t)off;
}

/* The kernel's semantics: stop at the first failure, which is reported
 * only if nothing was sent (then errno says why). */
int vz_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	const struct vz_sock_mode *mode = vz_mode_of(fd);
	unsigned int i;
	ssize_t r;
	int e;

	if (!vz_is_socket(fd))
		return (int)vz_sendto(fd, NULL, 0, flags, NULL, 0); /* errno */
	if (vlen > UIO_MAXIOV)
		vlen = UIO_MAXIOV;
	if (!vlen)
		return 0;
	if (!vec)
		return (int)fail(-EFAULT);
	mode->burst(true);
	for (i = 0; i < vlen; i++) {
		r = vz_sendmsg(fd, &vec[i].msg_hdr, flags);
		if (r < 0)
			break;
		vec[i].msg_len = (unsigned int)r;
	}
	e = errno;
	mode->burst(false);
	errno = e;
	return i ? (int)i : -1;
}

/* recvmmsg's timeout as a CLOCK_MONOTONIC deadline: 0, or -EINVAL for
 * one out of range. */
static int timeout_end(const struct timespec *timeout, __s64 *end)
{
	if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
	    timeout->tv_nsec >= 1000000000)
		return -EINVAL;
	*end = (__s64)vz_now_ns() + (__s64)timeout->tv_sec * 1000000000 +
	       timeout->tv_nsec;
	return 0;
}

/*
 * As Linux's: without MSG_WAITFORONE each datagram is waited for as the
 * flags say; with it, only the first, the rest taken if already queued.
 * The timeout, as the kernel's, is looked at after each datagram (a wait
 * for one is not cut short by it). A failure after some datagrams returns
 * their count.
 */
int vz_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		struct timespec *timeout)
{
	__s64 end = -1;
	unsigned int i;
	ssize_t r;

	if (!vz_is_socket(fd))
		return (int)vz_recvfrom(fd, NULL, 0, flags, NULL, NULL);
	if (timeout && timeout_end(timeout, &end))
		return (int)fail(-EINVAL);
	if (vlen > UIO_MAXIOV)
		vlen = UIO_MAXIOV;
	if (!vlen)
		return 0;
	if (!vec)
		return (int)fail(-EFAULT);
	for (i = 0; i < vlen; i++) {
		int f = flags & ~MSG_WAITFORONE;

		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		r = vz_recvmsg(fd, &vec[i].msg_hdr, f);
		if (r < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)r;
		if (end >= 0 && (__s64)vz_now_ns() >= end) {
			i++;
			break;
		}
	}
	return (int)i;
}
