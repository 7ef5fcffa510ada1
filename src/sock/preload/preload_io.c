// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload: the data calls. The iovec and mmsg calls are
 * libveloz-sock's (vz_sendmsg...), which gather into (and scatter from) a
 * per-thread bounce buffer, except when one iovec already is the buffer,
 * and check the vectors as Linux does. Ancillary data (msg_control) is not
 * supported: sendmsg with some fails with EOPNOTSUPP, recvmsg returns none.
 */
#include <errno.h>
#include <string.h>

#include "preload.h"

/* The checks and the gathering are libveloz-sock's (vz_sendmsg). */
ssize_t vz_pl_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return VZ_CALL(vz_sendmsg(fd, msg, flags));
}

ssize_t vz_pl_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return VZ_CALL(vz_recvmsg(fd, msg, flags));
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

/* Linux's semantics and checks, in libveloz-sock. */
int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	if (!vz_pl_veloz(fd))
		return VZ_LIBC(sendmmsg)(fd, vec, n, flags);
	return VZ_CALL(vz_sendmmsg(fd, vec, n, flags));
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

int recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
	     struct timespec *timeout)
{
	if (!vz_pl_veloz(fd))
		return VZ_LIBC(recvmmsg)(fd, vec, n, flags, timeout);
	return VZ_CALL(vz_recvmmsg(fd, vec, n, flags, timeout));
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
