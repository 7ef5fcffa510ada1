// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode: waiting. A socket's eventfd is readable while its queue
 * holds a datagram, so poll, select and epoll_wait are the kernel's own
 * calls on it; what they need from here is someone running the engine
 * while the application sleeps in them, and no wake-up hop while it is
 * busy:
 *
 *   - a wait first spins for the busy-poll budget ($VZ_BUSY_POLL_US, else
 *     DEFAULT_BUSY_US), running the thread's engines (direct_internal.h)
 *     and asking the kernel with a zero timeout, then sleeps in the real
 *     call. One thread spins on an engine at a time (`spinners`), and
 *     at most half the process's CPUs' worth of threads spin at once (the
 *     rest are the kernel's softirq's, the peer's and the woken threads');
 *     others sleep at once, woken by the eventfds the spinners' engines
 *     write. A spinning thread also turns the other engines while none
 *     of their own threads spins (`helpers`), so with one spinner, as on
 *     a small machine, every queue is still served by a spin.
 *   - each engine's background thread sleeps in poll() on its queue's
 *     AF_XDP socket, so a frame wakes it at once and it runs the engine
 *     (which writes the eventfds). While a thread spins on the engine it
 *     stays off the queue (they would both chase every frame) and looks
 *     again every spin budget; a spinner that goes to sleep rings it
 *     (`wake`), as does another engine that shares a neighbour answer.
 *
 * Across fork() the child gets the parent's descriptors but not its port:
 * sharing the AF_XDP rings would corrupt both. Its direct-socket calls fail
 * with ENOTSUP (one line on stderr, once); close works.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sock/app/busy.h"
#include "sock/direct/direct.h"
#include "sock/direct/direct_internal.h"
#include "sock/stack/stack.h"

static bool child; /* forked from the port's owner */
static int child_warned;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* ---- system calls past the shim ---- */

/* The system call writes what is left of the timeout back: a copy. */
static int sys_ppoll(struct pollfd *p, nfds_t n, const struct timespec *ts)
{
	struct timespec left;

	if (ts)
		left = *ts;
	return (int)syscall(SYS_ppoll, p, n, ts ? &left : NULL, NULL,
			    _NSIG / 8);
}

int vz_direct_sys_poll(struct pollfd *p, nfds_t n, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	return sys_ppoll(p, n, ms < 0 ? NULL : &ts);
}

/* An eventfd's counter, past the shim too (it would take a write on a
 * veloz descriptor for a datagram). */
void vz_direct_efd_ring(int fd)
{
	__u64 one = 1;

	if (syscall(SYS_write, fd, &one, sizeof(one)) < 0)
		return; /* EAGAIN: already non-zero */
}

void vz_direct_efd_drain(int fd)
{
	__u64 v;

	if (syscall(SYS_read, fd, &v, sizeof(v)) < 0)
		return; /* EAGAIN: already zero */
}

/* ---- fork ---- */

/* Not stdio: the program may be using stderr's buffer right now. */
static void ring_text(const char *text, size_t len)
{
	if (syscall(SYS_write, STDERR_FILENO, text, len) < 0)
		return;
}

static void in_child(void)
{
	unsigned int i;

	child = true;
	vz_direct.ready = false; /* no engine, no spin, no clean-up at exit */
	/* the parent may have held them at fork() */
	pthread_mutex_init(&vz_direct.lock, NULL);
	for (i = 0; i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];

		pthread_mutex_init(&e->lock, NULL);
		pthread_mutex_init(&e->inbox_lock, NULL);
		close(e->xfd);
		close(e->wake);
	}
	vz_direct.nengines = 0;
}

static void atfork_setup(void)
{
	pthread_atfork(NULL, NULL, in_child);
}

void vz_direct_atfork(void)
{
	pthread_once(&atfork_once, atfork_setup);
}

bool vz_direct_forked(void)
{
	static const char note[] =
		"libveloz-sock: direct-mode sockets belong to the process "
		"that made them; in a forked child their calls fail "
		"(ENOTSUP)\n";

	if (!child)
		return false;
	if (!__atomic_exchange_n(&child_warned, 1, __ATOMIC_RELAXED))
		ring_text(note, sizeof(note) - 1);
	return true;
}

/* ---- the background threads ---- */

/* Whether a frame may be waiting for no one: nobody ran e for a tick (its
 * timers are due too), or another engine shared an answer with it. */
static bool stale(const struct vz_direct_engine *e)
{
	return __atomic_load_n(&e->ninbox, __ATOMIC_RELAXED) ||
	       vz_now_ns() - __atomic_load_n(&e->last_run, __ATOMIC_RELAXED) >=
		       (__u64)TICK_MS * 1000000;
}

/* Whether a thread spins on e, as its own or helping: its background
 * thread stays off its queue meanwhile. */
static bool spun(const struct vz_direct_engine *e)
{
	return __atomic_load_n(&e->spinners, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&e->helpers, __ATOMIC_ACQUIRE);
}

/* Whether e's stack waits on a timer: datagrams held for their next
 * hop's address, or fragments for the rest of their datagram. (Read
 * without e->lock: a gauge read a moment late costs one long sleep.) */
static bool timing(const struct vz_direct_engine *e)
{
	const struct vz_stack_stats *st = vz_stack_get_stats(e->stack);

	return __atomic_load_n(&st->arp_queued, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&st->reasm_datagrams, __ATOMIC_RELAXED);
}

static void *background(void *arg)
{
	struct vz_direct_engine *e = arg;
	struct timespec tick = { 0, TICK_MS * 1000000L };
	struct timespec idle = { 0, IDLE_MS * 1000000L };
	struct timespec park = { 0, (long)vz_direct.busy_us * 1000 };
	struct pollfd p[2];
	bool watch;
	int rc;

	if (park.tv_nsec < 50000 || park.tv_nsec >= tick.tv_nsec)
		park.tv_nsec = park.tv_nsec < 50000 ? 50000 : tick.tv_nsec;
	while (!__atomic_load_n(&vz_direct.stop, __ATOMIC_ACQUIRE)) {
		watch = !spun(e);
		p[0] = (struct pollfd){ .fd = e->wake, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = e->xfd, .events = POLLIN };
		rc = sys_ppoll(p, watch ? 2 : 1,
			       !watch	   ? &park
			       : timing(e) ? &tick
					   : &idle);
		if (rc > 0 && (p[0].revents & POLLIN))
			vz_direct_efd_drain(e->wake);
		if (spun(e))
			continue; /* a spinning thread runs the engine */
		if (rc <= 0 && !stale(e))
			continue;
		pthread_mutex_lock(&e->lock);
		vz_direct_engine_run(e);
		pthread_mutex_unlock(&e->lock);
	}
	return NULL;
}

int vz_direct_bg_start(void)
{
	sigset_t all, old;
	unsigned int i;
	int rc = 0;

	/* the application's signals are for its own threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; !rc && i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];

		e->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (e->wake < 0 || pthread_create(&e->bg, NULL, background, e))
			rc = -1;
		else
			e->bg_running = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void vz_direct_bg_stop(void)
{
	unsigned int i;

	__atomic_store_n(&vz_direct.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];

		if (e->bg_running) {
			vz_direct_efd_ring(e->wake);
			pthread_join(e->bg, NULL);
			e->bg_running = false;
		}
		/* its eventfd stays open: an application thread may still
		 * ring it while the process exits */
	}
}

/* ---- spinning ---- */

/* Start a spin on a set of engines: the ones taken. Alone, only those no
 * other thread spins on (none: the caller sleeps at once). */
static __u32 spin_begin(__u32 engines, bool alone)
{
	__u32 taken = 0;
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++) {
		int none = 0;
		int *n = &vz_direct.engines[i].spinners;

		if (!(engines & (1u << i)))
			continue;
		if (!alone)
			__atomic_add_fetch(n, 1, __ATOMIC_ACQ_REL);
		else if (!__atomic_compare_exchange_n(n, &none, 1, false,
						      __ATOMIC_ACQ_REL,
						      __ATOMIC_RELAXED))
			continue;
		taken |= 1u << i;
	}
	return taken;
}

/* End a spin (helping: a helper's); one going to sleep hands each engine
 * nobody spins on any more to that engine's background thread. */
static void spin_end(__u32 engines, bool helping, bool sleeping)
{
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];

		if (!(engines & (1u << i)))
			continue;
		__atomic_sub_fetch(helping ? &e->helpers : &e->spinners, 1,
				   __ATOMIC_ACQ_REL);
		if (sleeping && !spun(e))
			vz_direct_efd_ring(e->wake);
	}
}

/* Start helping a set of engines. */
static void help_begin(__u32 engines)
{
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++)
		if (engines & (1u << i))
			__atomic_add_fetch(&vz_direct.engines[i].helpers, 1,
					   __ATOMIC_ACQ_REL);
}

/* Of a set of engines, those none of whose own threads spins. */
static __u32 unowned(__u32 engines)
{
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++)
		if (__atomic_load_n(&vz_direct.engines[i].spinners,
				    __ATOMIC_ACQUIRE))
			engines &= ~(1u << i);
	return engines;
}

void vz_direct_spinning(__u32 engines, bool on)
{
	if (on)
		spin_begin(engines, false);
	else
		spin_end(engines, false, false);
}

/* ---- waits ---- */

/* One look of a spinning wait: a turn of its engines (and of those it
 * helps that no owner turns), then the kernel's answer without sleeping
 * (*rc: what the wait returns). */
struct wait_look {
	int (*check)(void *arg, int ms);
	void *arg;
	int *rc;
	__u32 own, help;
};

static bool wait_look(const void *p)
{
	const struct wait_look *w = p;

	vz_direct_turn(w->own | (w->help ? unowned(w->help) : 0), false);
	*w->rc = w->check(w->arg, 0);
	return *w->rc != 0;
}

/* Start a wait's spin: false when it may not (too many threads spin, or
 * its engines have spinners of their own). */
static bool wait_spin_begin(struct wait_look *w)
{
	__u32 mine = vz_direct_my_engines();

	if (__atomic_add_fetch(&vz_direct.wait_spinners, 1, __ATOMIC_ACQ_REL) >
	    vz_direct.max_wait_spinners) {
		__atomic_sub_fetch(&vz_direct.wait_spinners, 1,
				   __ATOMIC_ACQ_REL);
		return false;
	}
	w->own = spin_begin(mine, true);
	if (!w->own) {
		__atomic_sub_fetch(&vz_direct.wait_spinners, 1,
				   __ATOMIC_ACQ_REL);
		return false;
	}
	w->help = vz_direct_all_engines() & ~mine;
	help_begin(w->help);
	return true;
}

static void wait_spin_end(const struct wait_look *w, bool sleeping)
{
	spin_end(w->own, false, sleeping);
	spin_end(w->help, true, sleeping);
	__atomic_sub_fetch(&vz_direct.wait_spinners, 1, __ATOMIC_ACQ_REL);
}

int vz_direct_wait(int (*check)(void *arg, int ms), void *arg, int timeout_ms)
{
	__s64 deadline = timeout_ms < 0 ? -1
					: (__s64)vz_now_ns() +
						  (__s64)timeout_ms * 1000000;
	int rc = 0;
	struct wait_look look = { check, arg, &rc, 0, 0 };
	__s64 left;

	if (!vz_direct.ready || child || !wait_spin_begin(&look))
		return check(arg, timeout_ms);
	/*
	 * Offering the CPU every few microseconds: what a server's other
	 * threads and its peer do next needs a CPU too. On two CPUs, a spin
	 * that kept its CPU for its whole budget held one request in a
	 * hundred of a threaded server up by about twice that budget. It
	 * spins even when no CPU looks free: the threads a datagram wakes in
	 * a threaded server (each in epoll on the same socket) would
	 * otherwise stop every spin, and each request would pay two wake-ups.
	 */
	if (vz_busy_spin_offering(wait_look, &look,
				  timeout_ms ? vz_direct.busy_us : 0,
				  deadline) ||
	    !timeout_ms) {
		wait_spin_end(&look, false);
		return rc;
	}
	wait_spin_end(&look, true);
	if (deadline < 0)
		return check(arg, -1);
	left = deadline - (__s64)vz_now_ns();
	/* rounded up: waking early would spin a caller that re-checks */
	return check(arg, left <= 0 ? 0 : (int)((left + 999999) / 1000000));
}

struct poll_arg {
	struct pollfd *fds;
	nfds_t n;
};

static int poll_check(void *arg, int ms)
{
	struct poll_arg *a = arg;

	return vz_direct_sys_poll(a->fds, a->n, ms);
}

/* A set of direct sockets only: their queues answer while spinning, and
 * their eventfds follow the queues only while the caller sleeps, so a
 * datagram costs no eventfd write and read unless someone sleeps. */
static int direct_only_check(void *arg, int ms)
{
	struct poll_arg *a = arg;
	int rc;

	if (!ms)
		return vz_direct_poll_ready(a->fds, a->n);
	vz_direct_sleep(a->fds, a->n, true);
	rc = vz_direct_sys_poll(a->fds, a->n, ms);
	vz_direct_sleep(a->fds, a->n, false);
	return rc;
}

int vz_direct_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	struct poll_arg a = { fds, n };
	bool direct_only = true;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (fds[i].fd >= 0 && !vz_direct_fd(fds[i].fd))
			direct_only = false;
		if (!vz_direct_fd(fds[i].fd))
			continue;
		if (child && vz_direct_forked())
			return fail(ENOTSUP);
	}
	if (direct_only && !child)
		return vz_direct_wait(direct_only_check, &a, timeout_ms);
	/* with kernel descriptors in the set, the kernel answers for all */
	for (i = 0; i < n; i++)
		vz_direct_watch(fds[i].fd);
	return vz_direct_wait(poll_check, &a, timeout_ms);
}
