// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: epoll over veloz and kernel descriptors together.
 *
 * An epoll set is a kernel epoll descriptor: the kernel members live in it
 * with the caller's data, untouched. The veloz members cannot: their
 * eventfd is written only while someone waits (the `waiting` words), and
 * its readiness says nothing about the rings. So they live here, beside
 * the kernel set, keyed by its descriptor, and are checked from their
 * rings with the same test as vz_poll (vz_client_revents).
 *
 * vz_epoll_wait takes what is ready on both sides (the kernel's with a
 * zero timeout, alternating which side goes first so neither starves the
 * other); when nothing is, it sets the veloz members' waiting words,
 * re-checks, and sleeps in one poll() on the kernel set's descriptor and
 * the members' eventfds.
 *
 * Edge-triggered members follow Linux's rule: a member is reported when a
 * wake-up happened since it was last reported (a datagram arrived, the
 * poller made room, an error was set, or it was just added or modified)
 * and it is ready now. EPOLLONESHOT disarms a member once reported, until
 * EPOLL_CTL_MOD.
 *
 * In direct mode (VZ_MODE=direct) a socket is an eventfd the engine keeps
 * readable while it holds a datagram: a kernel member, and the kernel's
 * epoll_wait after the mode's wait (direct mode's spin, mode.h).
 *
 * One lock guards every set: the scans are short and sets rarely shared
 * between threads. The order is the library's control lock, then this
 * one (a socket's last close forgets its entries under the former).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "sock/app/busy.h"
#include "sock/app/clock.h"
#include "sock/app/client.h"
#include "sock/app/mode.h"
#include "veloz/sock.h"

#define VZ_EP_IN (EPOLLIN | EPOLLRDNORM)
#define VZ_EP_OUT (EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND)
/* What Linux allows beside EPOLLEXCLUSIVE (EPOLLEXCLUSIVE_OK_BITS). */
#define VZ_EP_EXCL_OK                                                   \
	(EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
	 EPOLLWRBAND | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET |    \
	 EPOLLEXCLUSIVE)
#define VZ_EP_SMALL 16

struct vz_ep_entry {
	int fd; /* the key, with s (as Linux keys on descriptor and file) */
	struct vz_app_sock *s;
	__u32 events;
	epoll_data_t data;
	bool armed; /* false: an EPOLLONESHOT member already reported */
	bool pending; /* EPOLLET: a wake-up not yet reported */
	__u32 mark[3]; /* EPOLLET: the rings when last looked at */
	int slot; /* its eventfd's place in the current sleep, -1: none */
};

struct vz_ep {
	int epfd;
	int users; /* waits in progress, plus one while in the table */
	int kernel; /* kernel members added through us, -1: unknown */
	unsigned int turn;
	size_t n, cap, next; /* next: where the next scan starts */
	struct vz_ep_entry *v;
};

static struct {
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*poll)(struct pollfd *, nfds_t, int);
} sys;

static pthread_once_t sys_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vz_ep **eps; /* by descriptor */
static int eps_cap;
static int eps_live; /* sets in the table: vz_is_epoll's fast answer */

/* The shim shadows these: reach libc's (see client.c's libc_resolve). */
#define VZ_EP_RESOLVE(name)                                    \
	do {                                                   \
		void *p = dlsym(RTLD_NEXT, #name);             \
		sys.name = p ? (__typeof__(sys.name))p : name; \
	} while (0)

static void sys_resolve(void)
{
	VZ_EP_RESOLVE(epoll_create1);
	VZ_EP_RESOLVE(epoll_ctl);
	VZ_EP_RESOLVE(epoll_pwait);
	VZ_EP_RESOLVE(poll);
}

static void sys_init(void)
{
	pthread_once(&sys_once, sys_resolve);
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* ---- the sets ---- */

/* Under ep_lock. */
static struct vz_ep *ep_find(int epfd)
{
	return epfd >= 0 && epfd < eps_cap ? eps[epfd] : NULL;
}

static void ep_put(struct vz_ep *ep)
{
	if (--ep->users)
		return;
	free(ep->v);
	free(ep);
}

/* Under ep_lock: drop the set at epfd from the table (a closed or reused
 * descriptor); waits in progress keep it until they return. */
static void ep_unlink(int epfd)
{
	struct vz_ep *ep = ep_find(epfd);

	if (!ep)
		return;
	eps[epfd] = NULL;
	eps_live--;
	ep_put(ep);
}

/* Under ep_lock: a fresh set for epfd (replacing a stale one). */
static struct vz_ep *ep_make(int epfd, int kernel)
{
	struct vz_ep *ep;

	if (epfd >= eps_cap) {
		int cap = eps_cap ? eps_cap : 64;
		struct vz_ep **p;

		while (cap <= epfd)
			cap *= 2;
		p = realloc(eps, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + eps_cap, 0, (size_t)(cap - eps_cap) * sizeof(*p));
		eps = p;
		eps_cap = cap;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep_unlink(epfd);
	ep->epfd = epfd;
	ep->users = 1;
	ep->kernel = kernel;
	eps[epfd] = ep;
	eps_live++;
	return ep;
}

static struct vz_ep_entry *ep_entry(struct vz_ep *ep, int fd,
				    const struct vz_app_sock *s)
{
	for (size_t i = 0; i < ep->n; i++)
		if (ep->v[i].fd == fd && ep->v[i].s == s)
			return &ep->v[i];
	return NULL;
}

static void ep_remove(struct vz_ep *ep, struct vz_ep_entry *e)
{
	*e = ep->v[--ep->n];
	if (ep->next >= ep->n)
		ep->next = 0;
}

void vz_epoll_sock_gone(struct vz_app_sock *s)
{
	pthread_mutex_lock(&ep_lock);
	for (int i = 0; i < eps_cap && eps_live; i++) {
		struct vz_ep *ep = eps[i];

		for (size_t j = 0; ep && j < ep->n;) {
			if (ep->v[j].s == s)
				ep_remove(ep, &ep->v[j]);
			else
				j++;
		}
	}
	pthread_mutex_unlock(&ep_lock);
}

/* In a fork child: no veloz socket survives, the kernel sets do. */
void vz_epoll_forked(void)
{
	pthread_mutex_init(&ep_lock, NULL);
	for (int i = 0; i < eps_cap; i++)
		if (eps[i])
			eps[i]->n = 0;
}

bool vz_epoll_forget(int epfd)
{
	bool had;

	if (!__atomic_load_n(&eps_live, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&ep_lock);
	had = ep_find(epfd) != NULL;
	ep_unlink(epfd);
	pthread_mutex_unlock(&ep_lock);
	return had;
}

int vz_is_epoll(int fd)
{
	bool is;

	if (!__atomic_load_n(&eps_live, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&ep_lock);
	is = ep_find(fd) != NULL;
	pthread_mutex_unlock(&ep_lock);
	return is;
}

int vz_epoll_create1(int flags)
{
	int fd;

	sys_init();
	fd = sys.epoll_create1(flags);
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&ep_lock);
	/* A set nothing was added to yet has no kernel member; without the
	 * memory it is made on the first veloz member, as one unknown. */
	ep_make(fd, 0);
	pthread_mutex_unlock(&ep_lock);
	return fd;
}

/* ---- control ---- */

/* A kernel member: the kernel's call, counted when it worked. */
static int ctl_kernel(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct vz_ep *ep;
	int rc = sys.epoll_ctl(epfd, op, fd, ev);

	if (rc || (op != EPOLL_CTL_ADD && op != EPOLL_CTL_DEL) ||
	    !__atomic_load_n(&eps_live, __ATOMIC_RELAXED))
		return rc;
	pthread_mutex_lock(&ep_lock);
	ep = ep_find(epfd);
	if (ep && ep->kernel >= 0)
		ep->kernel +=
			op == EPOLL_CTL_ADD ? 1 : (ep->kernel > 0 ? -1 : 0);
	pthread_mutex_unlock(&ep_lock);
	return rc;
}

/*
 * Is epfd an epoll set? Asked of the kernel, as it would answer
 * epoll_ctl: removing the socket's eventfd, which is never a kernel
 * member, fails with ENOENT from a set, EBADF for no descriptor, EINVAL
 * for anything else. (0: the caller put the eventfd there behind our
 * back; it is a set all the same.)
 */
static int check_set(int epfd, int efd)
{
	if (!sys.epoll_ctl(epfd, EPOLL_CTL_DEL, efd, NULL) || errno == ENOENT)
		return 0;
	return -errno;
}

/* Linux's order: the event, the descriptors, then the operation. 0 or
 * -errno. */
static int ctl_check(int epfd, int op, const struct vz_app_sock *s,
		     const struct epoll_event *ev)
{
	int rc;

	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	rc = check_set(epfd, vz_client_efd(s));
	if (rc) {
		vz_epoll_forget(epfd); /* not a set (any more) */
		return rc;
	}
	if (op != EPOLL_CTL_DEL && (ev->events & EPOLLEXCLUSIVE) &&
	    (op == EPOLL_CTL_MOD || (ev->events & ~VZ_EP_EXCL_OK)))
		return -EINVAL;
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return -EINVAL;
	return 0;
}

/* Under ep_lock: a new entry at the end of the set, NULL without memory. */
static struct vz_ep_entry *entry_add(struct vz_ep *ep, int fd,
				     struct vz_app_sock *s)
{
	struct vz_ep_entry *e;

	if (ep->n == ep->cap) {
		size_t cap = ep->cap ? ep->cap * 2 : 8;
		void *p = realloc(ep->v, cap * sizeof(*ep->v));

		if (!p)
			return NULL;
		ep->v = p;
		ep->cap = cap;
	}
	e = &ep->v[ep->n++];
	e->fd = fd;
	e->s = s;
	return e;
}

/* Under ep_lock: what an added or modified entry waits for. */
static void entry_set(struct vz_ep_entry *e, const struct epoll_event *ev)
{
	e->events = ev->events;
	e->data = ev->data;
	e->armed = true;
	e->pending = true; /* Linux checks it at once, as a wake-up */
	e->slot = -1;
	vz_client_marks(e->s, e->mark);
}

/* Under ep_lock: ADD, MOD or DEL socket s's entry of the set: 0 or
 * -errno. */
static int ctl_apply(struct vz_ep *ep, int op, int fd, struct vz_app_sock *s,
		     const struct epoll_event *ev)
{
	struct vz_ep_entry *e = ep_entry(ep, fd, s);

	switch (op) {
	case EPOLL_CTL_ADD:
		if (e)
			return -EEXIST;
		e = entry_add(ep, fd, s);
		if (!e)
			return -ENOMEM;
		break;
	case EPOLL_CTL_MOD:
		if (!e)
			return -ENOENT;
		if (e->events & EPOLLEXCLUSIVE)
			return -EINVAL;
		break;
	default: /* EPOLL_CTL_DEL, as ctl_check let through */
		if (!e)
			return -ENOENT;
		ep_remove(ep, e);
		return 0;
	}
	entry_set(e, ev);
	return 0;
}

/* Under ep_lock: vz_epoll_ctl on the set, once the call is checked. */
static int ctl_locked(int epfd, int op, int fd, struct vz_app_sock *s,
		      const struct epoll_event *ev)
{
	struct vz_ep *ep;

	/* The socket may have been closed since the lookup: gone entries are
	 * purged under this lock, so check again under it. */
	if (vz_client_lookup(fd) != s)
		return -EBADF;
	ep = ep_find(epfd);
	if (!ep && op == EPOLL_CTL_ADD)
		ep = ep_make(epfd, -1);
	if (!ep)
		return op == EPOLL_CTL_ADD ? -ENOMEM : -ENOENT;
	return ctl_apply(ep, op, fd, s, ev);
}

int vz_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct vz_app_sock *s = vz_client_lookup(fd);
	int rc;

	sys_init();
	/* A direct-mode socket's eventfd is readable while it holds a
	 * datagram: a kernel member like any other. */
	if (!s) {
		if (op != EPOLL_CTL_DEL)
			vz_mode_of(fd)->watch(fd);
		return ctl_kernel(epfd, op, fd, ev);
	}
	rc = ctl_check(epfd, op, s, ev);
	if (rc)
		return fail(-rc);
	pthread_mutex_lock(&ep_lock);
	rc = ctl_locked(epfd, op, fd, s, ev);
	pthread_mutex_unlock(&ep_lock);
	return rc ? fail(-rc) : 0;
}

/* ---- waiting ---- */

static short poll_events(__u32 events)
{
	return (short)((events & VZ_EP_IN ? POLLIN : 0) |
		       (events & VZ_EP_OUT ? POLLOUT : 0));
}

/* Under ep_lock: report the ready veloz members into out[0..max), from
 * where the last scan stopped. */
static int scan(struct vz_ep *ep, struct epoll_event *out, int max)
{
	size_t n = ep->n, i, k;
	int got = 0;

	for (k = 0; k < n && got < max; k++) {
		struct vz_ep_entry *e = &ep->v[(ep->next + k) % n];
		__u32 r = 0;
		short rev;

		if (!e->armed)
			continue;
		if (e->events & EPOLLET) {
			__u32 m[3];

			vz_client_marks(e->s, m);
			if (memcmp(m, e->mark, sizeof(m))) {
				memcpy(e->mark, m, sizeof(m));
				e->pending = true;
			}
			if (!e->pending)
				continue;
			e->pending = false;
		}
		rev = vz_client_revents(e->s, poll_events(e->events));
		if (rev & POLLIN)
			r |= e->events & VZ_EP_IN;
		if (rev & POLLOUT)
			r |= e->events & VZ_EP_OUT;
		if (rev & POLLERR)
			r |= EPOLLERR; /* reported whether asked for or not */
		if (!r)
			continue;
		out[got].events = r;
		out[got].data = e->data;
		got++;
		if (e->events & EPOLLONESHOT)
			e->armed = false;
		i = (ep->next + k + 1) % n;
		if (got == max)
			ep->next = i;
	}
	return got;
}

/* What is ready now on both sides, the kernel's without waiting. */
static int collect(struct vz_ep *ep, struct epoll_event *out, int max)
{
	bool kernel_first, kernel;
	int got = 0, k;

	pthread_mutex_lock(&ep_lock);
	kernel_first = ep->turn++ & 1;
	kernel = ep->kernel != 0;
	pthread_mutex_unlock(&ep_lock);
	if (kernel && kernel_first) {
		k = sys.epoll_pwait(ep->epfd, out, max, 0, NULL);
		if (k < 0)
			return -errno;
		got = k;
	}
	pthread_mutex_lock(&ep_lock);
	got += scan(ep, out + got, max - got);
	pthread_mutex_unlock(&ep_lock);
	if (kernel && !kernel_first && got < max) {
		k = sys.epoll_pwait(ep->epfd, out + got, max - got, 0, NULL);
		if (k < 0)
			return got ? got : -errno;
		got += k;
	}
	return got;
}

/*
 * Sleep until the kernel set or a veloz member's eventfd stirs, or `ms`:
 * the members' waiting words are set first and the rings checked again
 * (the poller writes an eventfd only when it finds the word set, so
 * either it sees ours or we see its datagram). Returns what the re-check
 * found ready (>= 0), or -errno.
 */
static int sleep_on(struct vz_ep *ep, struct epoll_event *out, int max, int ms)
{
	struct pollfd small[VZ_EP_SMALL], *p = small;
	size_t m = 0, i;
	int rc;

	pthread_mutex_lock(&ep_lock);
	if (ep->n + 1 > VZ_EP_SMALL) {
		p = calloc(ep->n + 1, sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&ep_lock);
			return -ENOMEM;
		}
	}
	p[m++] = (struct pollfd){ .fd = ep->epfd, .events = POLLIN };
	for (i = 0; i < ep->n; i++) {
		struct vz_ep_entry *e = &ep->v[i];

		e->slot = -1;
		if (!e->armed)
			continue;
		vz_client_set_waiting(e->s, poll_events(e->events), 1);
		e->slot = (int)m;
		p[m++] = (struct pollfd){ .fd = vz_client_efd(e->s),
					  .events = POLLIN };
	}
	rc = scan(ep, out, max);
	pthread_mutex_unlock(&ep_lock);
	if (!rc && sys.poll(p, m, ms) < 0)
		rc = -errno;
	pthread_mutex_lock(&ep_lock);
	/* A kernel member we did not count (added by a raw system call):
	 * look at the kernel's side from now on, or this would spin. */
	if (!ep->kernel && (p[0].revents & POLLIN))
		ep->kernel = -1;
	/* Members still here (a closed socket's entries are gone, so no
	 * stale descriptor is read): withdraw, and empty what was written. */
	for (i = 0; i < ep->n; i++) {
		struct vz_ep_entry *e = &ep->v[i];

		if (e->slot < 0)
			continue;
		vz_client_set_waiting(e->s, poll_events(e->events), 0);
		if ((size_t)e->slot < m &&
		    p[e->slot].fd == vz_client_efd(e->s) &&
		    (p[e->slot].revents & POLLIN))
			vz_client_drain(p[e->slot].fd);
		e->slot = -1;
	}
	pthread_mutex_unlock(&ep_lock);
	if (p != small)
		free(p);
	return rc;
}

/*
 * Busy polling, as Linux's net.core.busy_poll for poll and epoll: before
 * the first sleep, spin on what collect() sees for the longest
 * SO_BUSY_POLL of the set's veloz members (0, no spin, by default).
 */
struct spin_arg {
	struct vz_ep *ep;
	struct epoll_event *out;
	int max, rc;
};

static bool spin_ready(const void *arg)
{
	struct spin_arg *a = (struct spin_arg *)arg;

	a->rc = collect(a->ep, a->out, a->max);
	return a->rc != 0;
}

static __u32 spin_us(struct vz_ep *ep)
{
	__u32 us = 0, v;
	size_t i;

	pthread_mutex_lock(&ep_lock);
	for (i = 0; i < ep->n; i++) {
		v = vz_client_busy_us(ep->v[i].s);
		if (v > us)
			us = v;
	}
	pthread_mutex_unlock(&ep_lock);
	return us;
}

/* The set epfd with veloz members, held (ep_put) for a wait; NULL when
 * the kernel alone can answer. */
static struct vz_ep *ep_hold(int epfd)
{
	struct vz_ep *ep;

	if (!__atomic_load_n(&eps_live, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&ep_lock);
	ep = ep_find(epfd);
	if (ep && !ep->n)
		ep = NULL; /* kernel members only: the kernel's call */
	if (ep)
		ep->users++;
	pthread_mutex_unlock(&ep_lock);
	return ep;
}

/* Collect, spin once (SO_BUSY_POLL), sleep, until something is ready or
 * the deadline: the number of events, 0, or -errno. */
static int ep_wait_loop(struct vz_ep *ep, struct epoll_event *events,
			int maxevents, __s64 until)
{
	int rc;

	for (bool spun = false;; spun = true) {
		struct spin_arg a = { ep, events, maxevents, 0 };
		__u32 us;
		int ms;

		rc = collect(ep, events, maxevents);
		if (rc)
			return rc;
		ms = vz_ms_left(until, INT_MAX);
		if (!ms)
			return 0;
		us = spun ? 0 : spin_us(ep);
		if (us && vz_busy_spin(spin_ready, &a, us, until))
			return a.rc;
		rc = sleep_on(ep, events, maxevents, ms);
		if (rc)
			return rc;
	}
}

/* The kernel's epoll_pwait, for direct mode's spin-then-sleep (its
 * sockets are kernel members: eventfds). */
struct sys_wait {
	int epfd;
	struct epoll_event *events;
	int max;
	const sigset_t *mask;
};

static int sys_wait(void *arg, int ms)
{
	struct sys_wait *w = arg;

	return sys.epoll_pwait(w->epfd, w->events, w->max, ms, w->mask);
}

static int ep_wait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *mask)
{
	__s64 until = timeout_ms < 0 ? -1
				     : (__s64)vz_now_ns() +
					       (__s64)timeout_ms * 1000000;
	struct vz_ep *ep;
	sigset_t old;
	int rc;

	sys_init();
	if (maxevents <= 0 || maxevents > (int)(INT_MAX / sizeof(*events)))
		return fail(EINVAL);
	if (!events)
		return fail(EFAULT);
	ep = ep_hold(epfd);
	if (!ep) {
		struct sys_wait w = { epfd, events, maxevents, mask };

		return vz_mode()->wait(sys_wait, &w, timeout_ms);
	}
	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	rc = ep_wait_loop(ep, events, maxevents, until);
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&ep_lock);
	ep_put(ep);
	pthread_mutex_unlock(&ep_lock);
	return rc < 0 ? fail(-rc) : rc;
}

int vz_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  int timeout_ms)
{
	return ep_wait(epfd, events, maxevents, timeout_ms, NULL);
}

int vz_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *mask)
{
	return ep_wait(epfd, events, maxevents, timeout_ms, mask);
}
