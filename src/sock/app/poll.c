// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: poll and select over veloz and kernel descriptors, and
 * the readiness questions epoll.c asks (client.h), so both answer alike.
 * A veloz socket is ready from its rings; to sleep, the caller sets the
 * rings' `waiting` words and sleeps on the sockets' eventfds beside the
 * kernel descriptors, in one kernel poll().
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/select.h>

#include "sock/app/busy.h"
#include "sock/app/app_internal.h"
#include "sock/stack/stack.h"
#include "veloz/sock.h"

/* A veloz descriptor's readiness from its rings. */
static short sock_revents(const struct vz_app_sock *s, short events)
{
	short r = 0;
	__u32 half = s->tx.size / 2;

	if (__atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE))
		r |= POLLERR | (events & POLLIN);
	if ((events & POLLIN) && vz_ring_readable(&s->rx))
		r |= POLLIN;
	/* Writable as Linux's sock_writeable(): half the buffer free, or
	 * room for the largest datagram. */
	if ((events & POLLOUT) &&
	    s->tx.size - vz_ring_used(&s->tx) >=
		    (half < vz_ring_need(VZ_STACK_MAX_UDP)
			     ? half
			     : vz_ring_need(VZ_STACK_MAX_UDP)))
		r |= POLLOUT;
	return r;
}

/* Fill revents of the veloz entries; the number of ready entries. */
static int poll_veloz(struct pollfd *fds, nfds_t n, struct vz_app_sock **socks)
{
	int ready = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (!socks[i])
			continue;
		fds[i].revents = sock_revents(socks[i], fds[i].events);
		if (fds[i].revents)
			ready++;
	}
	return ready;
}

static void sock_set_waiting(struct vz_app_sock *s, short events, __u32 on)
{
	if (events & POLLIN)
		__atomic_store_n(&s->shm->rx.waiting, on, __ATOMIC_SEQ_CST);
	if (events & POLLOUT)
		__atomic_store_n(&s->shm->tx.waiting, on, __ATOMIC_SEQ_CST);
}

static void set_waiting(struct pollfd *fds, nfds_t n,
			struct vz_app_sock **socks, __u32 on)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		if (socks[i])
			sock_set_waiting(socks[i], fds[i].events, on);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- for epoll.c (client.h) ---- */

struct vz_app_sock *vz_client_lookup(int fd)
{
	return lookup(fd);
}

short vz_client_revents(const struct vz_app_sock *s, short events)
{
	return sock_revents(s, events);
}

void vz_client_set_waiting(struct vz_app_sock *s, short events, __u32 on)
{
	sock_set_waiting(s, events, on);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int vz_client_efd(const struct vz_app_sock *s)
{
	return s->fd;
}

__u32 vz_client_busy_us(const struct vz_app_sock *s)
{
	return s->busy_us;
}

void vz_client_drain(int efd)
{
	vz_client_libc_init();
	eventfd_drain(efd);
}

void vz_client_marks(const struct vz_app_sock *s, __u32 mark[3])
{
	mark[0] = __atomic_load_n(&s->shm->rx.head, __ATOMIC_ACQUIRE);
	mark[1] = __atomic_load_n(&s->shm->tx.tail, __ATOMIC_ACQUIRE);
	mark[2] = __atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE);
}

/* The kernel's entries: fds as they are, a veloz entry's eventfd asked
 * for POLLIN, or left out (fd -1) when the call only looks (no sleep). */
static void kernel_entries(const struct pollfd *fds, nfds_t n,
			   struct vz_app_sock **socks, struct pollfd *k,
			   bool sleep)
{
	nfds_t i;

	for (i = 0; i < n; i++) {
		k[i] = fds[i];
		k[i].revents = 0;
		if (socks[i])
			k[i].events = POLLIN;
		if (socks[i] && !sleep)
			k[i].fd = -1; /* ignored by the kernel */
	}
}

/* The kernel's answers into fds (veloz entries' eventfds emptied): the
 * number of ready kernel entries. */
static int kernel_answers(struct pollfd *fds, nfds_t n,
			  struct vz_app_sock **socks, const struct pollfd *k)
{
	int ready = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (socks[i]) {
			if (k[i].revents & POLLIN)
				eventfd_drain(k[i].fd);
			continue;
		}
		fds[i].revents = k[i].revents;
		if (fds[i].revents)
			ready++;
	}
	return ready;
}

/*
 * One kernel poll() over the kernel descriptors and the veloz ones'
 * eventfds, then recompute: the number of ready entries, 0 on timeout,
 * -errno. When a veloz entry is ready already, the kernel ones are only
 * looked at (timeout 0); else it sleeps, the waiting words set first so the
 * poller writes the eventfds.
 */
static int poll_kernel(struct pollfd *fds, nfds_t n, struct vz_app_sock **socks,
		       struct pollfd *k, __s64 until)
{
	int rc, ready = poll_veloz(fds, n, socks);
	bool sleep = !ready;

	for (;;) {
		if (sleep) {
			set_waiting(fds, n, socks, 1);
			ready = poll_veloz(fds, n, socks);
		}
		kernel_entries(fds, n, socks, k, sleep);
		rc = vz_client_libc.poll(k, n, ready ? 0 : ms_left(until));
		if (sleep)
			set_waiting(fds, n, socks, 0);
		if (rc < 0)
			return -errno;
		ready = kernel_answers(fds, n, socks, k);
		ready += poll_veloz(fds, n, socks);
		if (ready || !ms_left(until))
			return ready;
		sleep = true;
	}
}

struct poll_spin {
	struct pollfd *fds;
	nfds_t n;
	struct vz_app_sock **socks;
};

static bool poll_spin_ready(const void *arg)
{
	const struct poll_spin *p = arg;

	return poll_veloz(p->fds, p->n, p->socks) > 0;
}

/*
 * SO_BUSY_POLL for poll(), as net.core.busy_poll: when every entry is a
 * veloz socket (a kernel descriptor could only be looked at by a system
 * call per turn), spin the longest of their budgets before sleeping.
 */
static int poll_busy(struct pollfd *fds, nfds_t n, struct vz_app_sock **socks,
		     __s64 until)
{
	struct poll_spin p = { fds, n, socks };
	__u32 us = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (!socks[i] && fds[i].fd >= 0)
			return 0;
		if (socks[i] && socks[i]->busy_us > us)
			us = socks[i]->busy_us;
	}
	if (!us || !vz_busy_spin(poll_spin_ready, &p, us, until))
		return 0;
	return poll_veloz(fds, n, socks);
}

int vz_poller_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	struct vz_app_sock *small_s[16], **socks = small_s;
	struct pollfd small_k[16], *k = small_k;
	__s64 until = timeout_ms < 0 ? -1
				     : (__s64)vz_now_ns() +
					       (__s64)timeout_ms * 1000000;
	bool any = false;
	int rc;
	nfds_t i;
	vz_client_libc_init();
	if (n > 16) {
		socks = calloc(n, sizeof(*socks));
		k = calloc(n, sizeof(*k));
		if (!socks || !k) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		socks[i] = lookup(fds[i].fd);
		any |= socks[i] != NULL;
		fds[i].revents = 0;
	}
	if (!any) {
		rc = vz_client_libc.poll(fds, n, timeout_ms);
		rc = rc < 0 ? -errno : rc;
		goto out;
	}
	rc = timeout_ms ? poll_busy(fds, n, socks, until) : 0;
	if (!rc)
		rc = poll_kernel(fds, n, socks, k, until);
out:
	if (socks != small_s)
		free(socks);
	if (k != small_k)
		free(k);
	return rc < 0 ? fail(rc) : rc;
}

/* select()'s timeout in poll()'s milliseconds (-1: none): 0 or -EINVAL. */
static int select_ms(const struct timeval *timeout, int *ms)
{
	*ms = -1;
	if (!timeout)
		return 0;
	if (timeout->tv_sec < 0 || timeout->tv_usec < 0)
		return -EINVAL;
	*ms = (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
	return 0;
}

/* The sets as poll entries: how many. */
static int sets_to_poll(int nfds, const fd_set *rd, const fd_set *wr,
			const fd_set *ex, struct pollfd *p)
{
	int i, n = 0;

	for (i = 0; i < nfds; i++) {
		short ev = (short)((rd && FD_ISSET(i, rd) ? POLLIN : 0) |
				   (wr && FD_ISSET(i, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(i, ex) ? POLLPRI : 0));

		if (ev)
			p[n++] = (struct pollfd){ .fd = i, .events = ev };
	}
	return n;
}

/* fd into the set when its entry asked for `ask` and got any of `got`:
 * 1 if so, as select counts. */
static int set_if(fd_set *set, const struct pollfd *p, short ask, short got)
{
	if (!set || !(p->events & ask) || !(p->revents & got))
		return 0;
	FD_SET(p->fd, set);
	return 1;
}

/* poll()'s answers back into the sets, as Linux's select counts them: one
 * per set a descriptor is ready in. */
static int poll_to_sets(const struct pollfd *p, int n, fd_set *rd, fd_set *wr,
			fd_set *ex)
{
	int i, rc = 0;

	if (rd)
		FD_ZERO(rd);
	if (wr)
		FD_ZERO(wr);
	if (ex)
		FD_ZERO(ex);
	for (i = 0; i < n; i++) {
		rc += set_if(rd, &p[i], POLLIN, POLLIN | POLLHUP | POLLERR);
		rc += set_if(wr, &p[i], POLLOUT, POLLOUT | POLLERR);
		rc += set_if(ex, &p[i], POLLPRI, POLLPRI);
	}
	return rc;
}

/* select() as poll(): the sets become entries and back. */
int vz_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
	      struct timeval *timeout)
{
	struct pollfd *p;
	int i, n, rc, ms;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return fail(-EINVAL);
	rc = select_ms(timeout, &ms);
	if (rc)
		return fail(rc);
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p)
		return fail(-ENOMEM);
	n = sets_to_poll(nfds, rd, wr, ex, p);
	rc = vz_poll(p, (nfds_t)n, ms);
	for (i = 0; rc >= 0 && i < n; i++)
		if (p[i].revents & POLLNVAL)
			rc = fail(-EBADF);
	if (rc >= 0)
		rc = poll_to_sets(p, n, rd, wr, ex);
	free(p);
	return rc;
}
