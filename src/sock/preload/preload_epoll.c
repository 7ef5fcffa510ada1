// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload: epoll and descriptor copies. An epoll set holding veloz
 * sockets is libveloz-sock's (vz_epoll_*: the kernel set plus the veloz
 * members beside it); dup, dup2, dup3 and F_DUPFD of a veloz socket make
 * another descriptor of the same socket, closed with its last one.
 *
 * Until the first veloz socket exists every call goes straight to libc, so
 * a program without UDP sockets pays nothing; an epoll set made before
 * that is taken over when a veloz socket joins it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>

#include "preload.h"

static struct {
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
} vz_ep_libc;

static pthread_once_t vz_ep_once = PTHREAD_ONCE_INIT;

#define VZ_EP_SYM(name) \
	vz_ep_libc.name = (__typeof__(vz_ep_libc.name))dlsym(RTLD_NEXT, #name)

static void vz_ep_resolve(void)
{
	VZ_EP_SYM(epoll_create);
	VZ_EP_SYM(epoll_create1);
	VZ_EP_SYM(epoll_wait);
	VZ_EP_SYM(epoll_pwait);
	VZ_EP_SYM(epoll_pwait2);
}

#define VZ_EP_LIBC(fn) (pthread_once(&vz_ep_once, vz_ep_resolve), vz_ep_libc.fn)

bool vz_pl_epoll(int fd)
{
	return fd >= 0 && vz_pl_active_now() && VZ_CALL(vz_is_epoll(fd));
}

int epoll_create1(int flags)
{
	if (!vz_pl_active_now())
		return VZ_EP_LIBC(epoll_create1)(flags);
	return VZ_CALL(vz_epoll_create1(flags));
}

int epoll_create(int size)
{
	if (!vz_pl_active_now())
		return VZ_EP_LIBC(epoll_create)(size);
	if (size <= 0) {
		errno = EINVAL;
		return -1;
	}
	return VZ_CALL(vz_epoll_create1(0));
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (!vz_pl_active_now())
		return VZ_LIBC(epoll_ctl)(epfd, op, fd, ev);
	return VZ_CALL(vz_epoll_ctl(epfd, op, fd, ev));
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
	       int timeout_ms)
{
	if (!vz_pl_active_now())
		return VZ_EP_LIBC(epoll_wait)(epfd, events, maxevents,
					      timeout_ms);
	return VZ_CALL(vz_epoll_wait(epfd, events, maxevents, timeout_ms));
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		int timeout_ms, const sigset_t *mask)
{
	if (!vz_pl_active_now())
		return VZ_EP_LIBC(epoll_pwait)(epfd, events, maxevents,
					       timeout_ms, mask);
	return VZ_CALL(
		vz_epoll_pwait(epfd, events, maxevents, timeout_ms, mask));
}

/* Nanoseconds are rounded up to milliseconds: waking early would spin a
 * caller that re-checks. */
int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		 const struct timespec *ts, const sigset_t *mask)
{
	long long ms;

	if (!vz_pl_active_now() || !VZ_CALL(vz_is_epoll(epfd))) {
		if (!VZ_EP_LIBC(epoll_pwait2)) {
			errno = ENOSYS;
			return -1;
		}
		return vz_ep_libc.epoll_pwait2(epfd, events, maxevents, ts,
					       mask);
	}
	if (ts &&
	    (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) {
		errno = EINVAL;
		return -1;
	}
	ms = !ts ? -1
		 : (long long)ts->tv_sec * 1000 +
			     (ts->tv_nsec + 999999) / 1000000;
	if (ms > INT_MAX)
		ms = INT_MAX;
	return VZ_CALL(vz_epoll_pwait(epfd, events, maxevents, (int)ms, mask));
}

int dup(int fd)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_dup(fd));
	return VZ_LIBC(dup)(fd);
}

/* Through the library too when newfd is a veloz socket or epoll set: it
 * is closed by the copy, and the library must know. */
static bool vz_pl_dup_ours(int oldfd, int newfd)
{
	return vz_pl_veloz(oldfd) || vz_pl_veloz(newfd) || vz_pl_epoll(newfd);
}

int dup2(int oldfd, int newfd)
{
	if (vz_pl_dup_ours(oldfd, newfd))
		return VZ_CALL(vz_dup2(oldfd, newfd));
	return VZ_LIBC(dup2)(oldfd, newfd);
}

int dup3(int oldfd, int newfd, int flags)
{
	if (vz_pl_dup_ours(oldfd, newfd))
		return VZ_CALL(vz_dup3(oldfd, newfd, flags));
	return VZ_LIBC(dup3)(oldfd, newfd, flags);
}
