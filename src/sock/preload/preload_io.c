// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload: the data calls. libveloz-sock moves one contiguous
 * buffer per datagram, so the iovec calls gather into (and scatter from) a
 * per-thread bounce buffer, except when one iovec already is the buffer.
 * Ancillary data (msg_control) is not supported: sendmsg with some fails
 * with EOPNOTSUPP, recvmsg returns none.
 */
#include <errno.h>
#include <string.h>

#include "preload.h"

static size_t vz_pl_iov_total(const struct iovec *iov, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		if (iov[i].iov_len > VZ_PL_MAX_DGRAM - total)
			return (size_t)VZ_PL_MAX_DGRAM + 1;
		total += iov[i].iov_len;
	}
	return total;
}

ssize_t vz_pl_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	const struct iovec *iov = msg->msg_iov;
	size_t total, off = 0;
	char *buf;

	if (msg->msg_controllen) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (msg->msg_iovlen == 1)
		return VZ_CALL(vz_sendto(fd, iov[0].iov_base, iov[0].iov_len,
					 flags, msg->msg_name,
					 msg->msg_namelen));
	total = vz_pl_iov_total(iov, msg->msg_iovlen);
	if (total > VZ_PL_MAX_DGRAM) {
		errno = EMSGSIZE;
		return -1;
	}
	buf = vz_pl_bounce();
	if (!buf)
		return -1;
	for (size_t i = 0; i < msg->msg_iovlen; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return VZ_CALL(vz_sendto(fd, buf, total, flags, msg->msg_name,
				 msg->msg_namelen));
}

static size_t vz_pl_scatter(const struct msghdr *msg, const char *buf,
			    size_t len)
{
	size_t off = 0;

	for (size_t i = 0; i < msg->msg_iovlen && off < len; i++) {
		size_t n = msg->msg_iov[i].iov_len;

		if (n > len - off)
			n = len - off;
		memcpy(msg->msg_iov[i].iov_base, buf + off, n);
		off += n;
	}
	return off;
}

/*
 * MSG_TRUNC makes libveloz-sock return the datagram's whole length, so
 * truncation shows even when one iovec takes the bytes directly.
 */
ssize_t vz_pl_recvmsg(int fd, struct msghdr *msg, int flags)
{
	socklen_t namelen = msg->msg_namelen;
	socklen_t *lenp = msg->msg_name ? &namelen : NULL;
	bool direct = msg->msg_iovlen <= 1;
	char none, *buf = &none; /* no iovec: 0 bytes, to a valid address */
	size_t copied, cap = 0;
	ssize_t n;

	if (direct) {
		if (msg->msg_iovlen && msg->msg_iov[0].iov_base) {
			buf = msg->msg_iov[0].iov_base;
			cap = msg->msg_iov[0].iov_len;
		}
	} else {
		buf = vz_pl_bounce();
		cap = VZ_PL_BOUNCE;
		if (!buf)
			return -1;
	}
	n = VZ_CALL(vz_recvfrom(fd, buf, cap, flags | MSG_TRUNC, msg->msg_name,
				lenp));
	if (n < 0)
		return -1;
	copied = direct ? ((size_t)n < cap ? (size_t)n : cap)
			: vz_pl_scatter(msg, buf, n);
	msg->msg_namelen = lenp ? namelen : 0;
	msg->msg_controllen = 0;
	msg->msg_flags = copied < (size_t)n ? MSG_TRUNC : 0;
	return flags & MSG_TRUNC ? n : (ssize_t)copied;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
	       __CONST_SOCKADDR_ARG to, socklen_t tolen)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(
			vz_sendto(fd, buf, len, flags, to.__sockaddr__, tolen));
	return VZ_LIBC(sendto)(fd, buf, len, flags, to.__sockaddr__, tolen);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_send(fd, buf, len, flags));
	return VZ_LIBC(send)(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_send(fd, buf, len, 0));
	return VZ_LIBC(write)(fd, buf, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (vz_pl_veloz(fd))
		return vz_pl_sendmsg(fd, msg, flags);
	return VZ_LIBC(sendmsg)(fd, msg, flags);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };

	if (vz_pl_veloz(fd)) {
		if (n < 0) {
			errno = EINVAL;
			return -1;
		}
		return vz_pl_sendmsg(fd, &msg, 0);
	}
	return VZ_LIBC(writev)(fd, iov, n);
}

/* The kernel's semantics: stop at the first failure, which is reported
 * only if nothing was sent. */
int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	unsigned int i;
	ssize_t r;

	if (!vz_pl_veloz(fd))
		return VZ_LIBC(sendmmsg)(fd, vec, n, flags);
	for (i = 0; i < n; i++) {
		r = vz_pl_sendmsg(fd, &vec[i].msg_hdr, flags);
		if (r < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = r;
	}
	return i;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG from,
		 socklen_t *fromlen)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_recvfrom(fd, buf, len, flags,
					   from.__sockaddr__, fromlen));
	return VZ_LIBC(recvfrom)(fd, buf, len, flags, from.__sockaddr__,
				 fromlen);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_recv(fd, buf, len, flags));
	return VZ_LIBC(recv)(fd, buf, len, flags);
}

ssize_t read(int fd, void *buf, size_t len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_recv(fd, buf, len, 0));
	return VZ_LIBC(read)(fd, buf, len);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (vz_pl_veloz(fd))
		return vz_pl_recvmsg(fd, msg, flags);
	return VZ_LIBC(recvmsg)(fd, msg, flags);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };

	if (vz_pl_veloz(fd)) {
		if (n < 0) {
			errno = EINVAL;
			return -1;
		}
		return vz_pl_recvmsg(fd, &msg, 0);
	}
	return VZ_LIBC(readv)(fd, iov, n);
}

/*
 * The first datagram as the flags say, the rest only if already queued
 * (the kernel's MSG_WAITFORONE); the timeout is not supported.
 */
int recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
	     struct timespec *timeout)
{
	unsigned int i;
	ssize_t r;

	if (!vz_pl_veloz(fd))
		return VZ_LIBC(recvmmsg)(fd, vec, n, flags, timeout);
	flags &= ~MSG_WAITFORONE;
	for (i = 0; i < n; i++) {
		r = vz_pl_recvmsg(fd, &vec[i].msg_hdr,
				  i ? flags | MSG_DONTWAIT : flags);
		if (r < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = r;
	}
	return i;
}

/*
 * _FORTIFY_SOURCE builds call these: a buffer smaller than the length is
 * libc's to report (it aborts).
 */
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen || !vz_pl_veloz(fd))
		return VZ_LIBC(recv_chk)(fd, buf, len, buflen, flags);
	return recv(fd, buf, len, flags);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen || !vz_pl_veloz(fd))
		return VZ_LIBC(recvfrom_chk)(fd, buf, len, buflen, flags, from,
					     fromlen);
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen || !vz_pl_veloz(fd))
		return VZ_LIBC(read_chk)(fd, buf, len, buflen);
	return read(fd, buf, len);
}
