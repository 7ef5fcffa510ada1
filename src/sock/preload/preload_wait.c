// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload: descriptor flags and waiting. poll and select go to
 * libveloz-sock as soon as one veloz socket is among the descriptors (it
 * waits on veloz and kernel descriptors together), else straight to libc.
 * epoll and descriptor copies are in preload_epoll.c.
 */
/* meson's -D_FILE_OFFSET_BITS=64 would rename our fcntl to fcntl64 */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#include "preload.h"

static int vz_pl_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	/* close-on-exec and the like belong to the eventfd itself */
	if (cmd == F_GETFD || cmd == F_SETFD || !vz_pl_veloz(fd))
		return real(fd, cmd, arg);
	switch (cmd) {
	case F_GETFL:
	case F_SETFL:
		return VZ_CALL(vz_fcntl(fd, cmd, (int)(long)arg));
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return VZ_CALL(vz_fcntl(fd, cmd, (int)(long)arg));
	default:
		return real(fd, cmd, arg);
	}
}

/* The third argument is an int or a pointer: both travel in a register. */
int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return vz_pl_fcntl(VZ_LIBC(fcntl), fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return vz_pl_fcntl(VZ_LIBC(fcntl64), fd, cmd, arg);
}

static int vz_pl_fionbio(int fd, const int *on)
{
	int fl = VZ_CALL(vz_fcntl(fd, F_GETFL, 0));

	if (fl < 0)
		return -1;
	fl = *on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return VZ_CALL(vz_fcntl(fd, F_SETFL, fl)) < 0 ? -1 : 0;
}

/* The size of the next datagram (MSG_TRUNC: without copying it), 0 when
 * none is queued. */
static int vz_pl_fionread(int fd, int *out)
{
	char none; /* not NULL: libveloz-sock copies 0 bytes to it */
	ssize_t n = VZ_CALL(vz_recvfrom(
		fd, &none, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT, NULL, NULL));

	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -1;
	*out = n < 0 ? 0 : (int)n;
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!vz_pl_veloz(fd))
		return VZ_LIBC(ioctl)(fd, req, arg);
	switch (req) {
	case FIONBIO:
		return vz_pl_fionbio(fd, arg);
	case FIONREAD:
		return vz_pl_fionread(fd, arg);
	case FIOCLEX:
	case FIONCLEX:
		return VZ_LIBC(ioctl)(fd, req, arg);
	default:
		errno = ENOTTY;
		return -1;
	}
}

static bool vz_pl_any_pollfd(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (vz_pl_veloz(fds[i].fd))
			return true;
	return false;
}

int poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	if (!vz_pl_any_pollfd(fds, n))
		return VZ_LIBC(poll)(fds, n, timeout_ms);
	return VZ_CALL(vz_poll(fds, n, timeout_ms));
}

static int vz_pl_ts_ms(const struct timespec *ts)
{
	long long ms;

	if (!ts)
		return -1;
	/* rounded up: waking early would spin a caller that re-checks */
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/*
 * The signal mask is swapped around the wait, not atomically with it as
 * ppoll does: a signal arriving just before the wait is only seen after it.
 */
int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
	  const sigset_t *mask)
{
	sigset_t old;
	int r, err;

	if (!vz_pl_any_pollfd(fds, n))
		return VZ_LIBC(ppoll)(fds, n, ts, mask);
	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	r = VZ_CALL(vz_poll(fds, n, vz_pl_ts_ms(ts)));
	err = errno;
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return r;
}

static bool vz_pl_any_fdset(int nfds, const fd_set *rd, const fd_set *wr,
			    const fd_set *ex)
{
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++) {
		if (!(rd && FD_ISSET(fd, rd)) && !(wr && FD_ISSET(fd, wr)) &&
		    !(ex && FD_ISSET(fd, ex)))
			continue;
		if (vz_pl_veloz(fd))
			return true;
	}
	return false;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	if (!vz_pl_any_fdset(nfds, rd, wr, ex))
		return VZ_LIBC(select)(nfds, rd, wr, ex, tv);
	return VZ_CALL(vz_select(nfds, rd, wr, ex, tv));
}

/* The same caveat on the signal mask as ppoll's. */
int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
	    const struct timespec *ts, const sigset_t *mask)
{
	struct timeval tv;
	sigset_t old;
	int r, err;

	if (!vz_pl_any_fdset(nfds, rd, wr, ex))
		return VZ_LIBC(pselect)(nfds, rd, wr, ex, ts, mask);
	if (ts) {
		tv.tv_sec = ts->tv_sec;
		tv.tv_usec = (ts->tv_nsec + 999) / 1000;
	}
	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	r = VZ_CALL(vz_select(nfds, rd, wr, ex, ts ? &tv : NULL));
	err = errno;
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return r;
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout_ms, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return VZ_LIBC(poll_chk)(fds, n, timeout_ms, fdslen);
	return poll(fds, n, timeout_ms);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return VZ_LIBC(ppoll_chk)(fds, n, ts, mask, fdslen);
	return ppoll(fds, n, ts, mask);
}
