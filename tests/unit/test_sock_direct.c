// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's sockets without a port (src/sock/direct): datagrams are
 * queued as the engine would (vz_direct_enqueue), and the kernel's poll
 * and epoll are asked about the socket's eventfd. Its readiness follows
 * the queue (level, edge, EPOLLONESHOT, nested and shared sets); dup
 * copies name one socket, closed with the last; a close in another thread
 * ends a blocked receive with EBADF; a forked child's calls fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sock/direct/direct.h"
#include "sock/direct/direct_internal.h"
#include "sock/app/busy.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A datagram for fd's socket, as the engine queues it. */
static bool deliver(int fd, const char *text)
{
	struct in6_addr from = in6_map(htonl(0x7f000001));
	bool ok = false;

	pthread_mutex_lock(&vz_direct.lock);
	if (vz_direct.by_fd[fd])
		ok = vz_direct_enqueue(vz_direct.by_fd[fd], &from, htons(999),
				       0, text, strlen(text));
	pthread_mutex_unlock(&vz_direct.lock);
	return ok;
}

/* The kernel's poll on the socket's eventfd, watched as the shim's poll,
 * select and epoll_ctl watch it (vz_direct_watch). */
static short revents(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };

	vz_direct_watch(fd);
	return poll(&p, 1, 0) < 0 ? -1 : p.revents;
}

/* The next datagram's text, "" when none (non-blocking). */
static const char *recv_text(int fd, char *buf, size_t len)
{
	ssize_t n =
		vz_direct_recvfrom(fd, buf, len - 1, MSG_DONTWAIT, NULL, NULL);

	buf[n < 0 ? 0 : n] = 0;
	return buf;
}

static int ep_add(int ep, int fd, __u32 events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	vz_direct_watch(fd);
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int ep_count(int ep, int ms)
{
	struct epoll_event ev[4];

	return epoll_wait(ep, ev, 4, ms);
}

/* poll over a direct socket and a pipe, as the shim hands it over. */
static void test_poll_mixed(int fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			       { .events = POLLIN } };
	int pp[2];
	double t;
	char c;

	REQUIRE(!pipe(pp), "pipe");
	p[1].fd = pp[0];
	t = now_s();
	CHECK(vz_direct_poll(p, 2, 30) == 0 && now_s() - t >= 0.025,
	      "nothing ready: its timeout");
	CHECK(deliver(fd, "m") && write(pp[1], "k", 1) == 1, "both ready");
	CHECK(vz_direct_poll(p, 2, 1000) == 2 && p[0].revents == POLLIN &&
		      p[1].revents == POLLIN,
	      "both reported");
	CHECK(read(pp[0], &c, 1) == 1 &&
		      vz_direct_recvfrom(fd, &c, 1, 0, NULL, NULL) == 1,
	      "read both");
	CHECK(vz_direct_poll(p, 2, 0) == 0, "read: nothing");
	close(pp[0]);
	close(pp[1]);
out:;
}

/* A socket nothing polls: its datagrams cost no eventfd write; watched,
 * what is queued makes it readable at once. */
static void test_unwatched(void)
{
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	struct pollfd p = { .events = POLLIN };
	char buf[32];

	REQUIRE(fd >= 0, "a socket (%s)", strerror(errno));
	p.fd = fd;
	CHECK(deliver(fd, "q") && poll(&p, 1, 0) == 0,
	      "unwatched: the eventfd untouched");
	vz_direct_watch(fd);
	CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLIN,
	      "watched: readable with what is queued");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "q") &&
		      poll(&p, 1, 0) == 0,
	      "read: drained");
	CHECK(!vz_direct_close(fd), "close");
out:;
}

/* poll over direct sockets only: answered from their queues, the eventfd
 * following a queue only while a caller sleeps on it. */
static void test_poll_direct_only(void)
{
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	struct pollfd p = { .events = POLLIN | POLLOUT },
		      k = { .events = POLLIN };
	char buf[32];
	double t;

	REQUIRE(fd >= 0, "a socket (%s)", strerror(errno));
	p.fd = k.fd = fd;
	CHECK(vz_direct_poll(&p, 1, 0) == 1 && p.revents == POLLOUT,
	      "empty: writable only (%#x)", p.revents);
	CHECK(deliver(fd, "r") && vz_direct_poll(&p, 1, 0) == 1 &&
		      p.revents == (POLLIN | POLLOUT),
	      "queued: readable (%#x)", p.revents);
	CHECK(poll(&k, 1, 0) == 0, "the eventfd untouched: no sleeper");
	p.events = POLLIN;
	CHECK(vz_direct_poll(&p, 1, 1000) == 1 && p.revents == POLLIN &&
		      poll(&k, 1, 0) == 0,
	      "readable at once, still no eventfd write");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "r"), "read");
	t = now_s();
	CHECK(vz_direct_poll(&p, 1, 30) == 0 && now_s() - t >= 0.025 &&
		      poll(&k, 1, 0) == 0,
	      "nothing: its timeout, the eventfd left empty");
	CHECK(deliver(fd, "s") && poll(&k, 1, 0) == 0,
	      "after the sleep, a datagram costs no eventfd write again");
	CHECK(!vz_direct_close(fd), "close");
out:;
}

static void test_readiness(void)
{
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	char buf[32];

	REQUIRE(fd >= 0 && vz_direct_fd(fd), "a socket (%s)", strerror(errno));
	CHECK(revents(fd) == POLLOUT, "empty: writable only (%#x)",
	      revents(fd));
	CHECK(deliver(fd, "one") && deliver(fd, "two"), "queued");
	CHECK(revents(fd) == (POLLIN | POLLOUT), "a datagram: readable");
	CHECK(vz_direct_recvfrom(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT,
				 NULL, NULL) == 3,
	      "peek");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "one") &&
		      (revents(fd) & POLLIN),
	      "one of two read: still readable");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "two") &&
		      !(revents(fd) & POLLIN),
	      "the queue empty: not readable");
	CHECK(vz_direct_recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, NULL,
				 NULL) < 0 &&
		      errno == EAGAIN,
	      "nothing: EAGAIN");
	test_poll_mixed(fd);
	CHECK(!vz_direct_close(fd), "close");
out:;
}

static void test_epoll_modes(void)
{
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	int lt = epoll_create1(0), et = epoll_create1(0);
	int one = epoll_create1(0), outer = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };
	char buf[32];

	REQUIRE(fd >= 0 && lt >= 0 && et >= 0 && one >= 0 && outer >= 0,
		"set-up");
	/* one socket in four sets, one of them inside another */
	REQUIRE(!ep_add(lt, fd, EPOLLIN) &&
			!ep_add(et, fd, EPOLLIN | EPOLLET) &&
			!ep_add(one, fd, EPOLLIN | EPOLLONESHOT) &&
			!ep_add(outer, lt, EPOLLIN),
		"epoll_ctl on a direct socket (%s)", strerror(errno));
	CHECK(!ep_count(lt, 0) && !ep_count(et, 0) && !ep_count(one, 0) &&
		      !ep_count(outer, 0),
	      "empty: nothing");
	CHECK(deliver(fd, "a"), "queued");
	CHECK(ep_count(lt, 0) == 1 && ep_count(lt, 0) == 1, "LT: until read");
	CHECK(ep_count(outer, 0) == 1, "nested: the inner set is ready");
	CHECK(ep_count(et, 0) == 1 && ep_count(et, 0) == 0, "ET: once");
	CHECK(ep_count(one, 0) == 1 && ep_count(one, 0) == 0, "ONESHOT: once");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "a"), "read");
	CHECK(!ep_count(lt, 0) && !ep_count(outer, 0), "LT: read, not ready");
	/* the queue emptied: the next datagram is a new edge */
	CHECK(deliver(fd, "b"), "queued");
	CHECK(ep_count(et, 0) == 1, "ET: a new datagram after draining");
	CHECK(ep_count(one, 0) == 0, "ONESHOT: disarmed");
	ev.data.fd = fd;
	CHECK(!epoll_ctl(one, EPOLL_CTL_MOD, fd, &ev) && ep_count(one, 0) == 1,
	      "ONESHOT: re-armed by EPOLL_CTL_MOD");
	CHECK(!strcmp(recv_text(fd, buf, sizeof(buf)), "b"), "read");
	CHECK(!vz_direct_close(fd), "close");
	CHECK(!ep_count(lt, 0) && !ep_count(et, 0), "closed: gone from sets");
out:
	close(lt);
	close(et);
	close(one);
	close(outer);
}

static int bind_port(int fd, __u16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port) };

	return vz_direct_bind(fd, (struct sockaddr *)&sin, sizeof(sin));
}

static void test_dup(void)
{
	int a = vz_direct_sock_new(AF_INET, SOCK_DGRAM), b, c, other, ep = -1,
	    p[2];
	char buf[32];

	REQUIRE(a >= 0 && !bind_port(a, 5001), "a bound socket");
	b = vz_direct_fcntl(a, F_DUPFD_CLOEXEC, 0);
	REQUIRE(b >= 0 && b != a && vz_direct_fd(b), "F_DUPFD_CLOEXEC (%s)",
		strerror(errno));
	CHECK(fcntl(b, F_GETFD) == FD_CLOEXEC && fcntl(a, F_GETFD) == 0,
	      "the copy's own close-on-exec");
	ep = epoll_create1(0);
	REQUIRE(ep >= 0 && !ep_add(ep, b, EPOLLIN), "the copy in a set");
	CHECK(!vz_direct_close(a), "close the first");
	CHECK(vz_direct_fcntl(a, F_DUPFD, 0) < 0 && errno == EBADF,
	      "dup of a closed descriptor: EBADF");
	other = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	CHECK(other >= 0 && bind_port(other, 5001) < 0 && errno == EADDRINUSE,
	      "the port still the socket's");
	CHECK(deliver(b, "x") && ep_count(ep, 0) == 1,
	      "the copy readable after the first closed");
	CHECK(!strcmp(recv_text(b, buf, sizeof(buf)), "x") &&
		      !(revents(b) & POLLIN),
	      "read through the copy, drained");
	/* dup2 over another direct socket: that one closes first */
	c = vz_direct_dup3(b, other, 0);
	CHECK(c == other && vz_direct.by_fd[c] == vz_direct.by_fd[b],
	      "dup2 onto another socket's descriptor");
	CHECK(!vz_direct_close(b), "close one copy");
	CHECK(deliver(c, "y") && !strcmp(recv_text(c, buf, sizeof(buf)), "y"),
	      "the last copy works");
	/* dup2 of a kernel descriptor over the last copy: the socket goes */
	REQUIRE(!pipe(p), "pipe");
	CHECK(vz_direct_dup3(p[0], c, 0) == c && !vz_direct_fd(c),
	      "a kernel descriptor over the last copy");
	other = vz_direct_sock_new(AF_INET, SOCK_DGRAM);
	CHECK(other >= 0 && !bind_port(other, 5001),
	      "the port free with the last descriptor");
	CHECK(vz_direct_recvfrom(c, buf, 1, MSG_DONTWAIT, NULL, NULL) < 0 &&
		      errno == EBADF,
	      "no socket there any more");
	close(c);
	close(p[0]);
	close(p[1]);
	vz_direct_close(other);
out:
	if (ep >= 0)
		close(ep);
}

struct blocked {
	int fd;
	ssize_t rc;
	int err;
	char buf[32];
};

static void *recv_blocking(void *arg)
{
	struct blocked *b = arg;

	b->rc = vz_direct_recvfrom(b->fd, b->buf, sizeof(b->buf) - 1, 0, NULL,
				   NULL);
	b->err = errno;
	return NULL;
}

static void *epoll_blocking(void *arg)
{
	struct blocked *b = arg;

	b->rc = ep_count(b->fd, 300);
	b->err = errno;
	return NULL;
}

static void test_close_while_waiting(void)
{
	struct blocked r = { 0 }, e = { 0 };
	pthread_t tr, te;
	double t;
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM);

	REQUIRE(fd >= 0, "a socket");
	/* a blocked receive gets what comes */
	r.fd = fd;
	pthread_create(&tr, NULL, recv_blocking, &r);
	usleep(20000); /* not a synchronisation: makes the sleep likely */
	CHECK(deliver(fd, "late"), "queued");
	pthread_join(tr, NULL);
	r.buf[r.rc > 0 ? r.rc : 0] = 0;
	CHECK(r.rc == 4 && !strcmp(r.buf, "late"), "blocked receive (%zd)",
	      r.rc);
	/* closed under a blocked receive and a blocked epoll_wait */
	e.fd = epoll_create1(0);
	REQUIRE(e.fd >= 0 && !ep_add(e.fd, fd, EPOLLIN), "a set");
	pthread_create(&tr, NULL, recv_blocking, &r);
	pthread_create(&te, NULL, epoll_blocking, &e);
	usleep(50000);
	t = now_s();
	CHECK(!vz_direct_close(fd), "close from another thread");
	pthread_join(tr, NULL);
	CHECK(r.rc < 0 && r.err == EBADF, "the receive: EBADF (%zd %s)", r.rc,
	      strerror(r.err));
	CHECK(now_s() - t < 0.2, "at once (%.3f s)", now_s() - t);
	pthread_join(te, NULL);
	CHECK(e.rc == 0, "epoll_wait: nothing reported (%zd)", e.rc);
	close(e.fd);
out:;
}

static void test_fork(void)
{
	int fd = vz_direct_sock_new(AF_INET, SOCK_DGRAM), err[2], st = 0;
	char line[256] = "";
	pid_t pid;
	ssize_t n;

	REQUIRE(fd >= 0 && !pipe(err), "set-up");
	pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (!pid) {
		char buf[8];
		struct sockaddr_in sin;
		socklen_t len = sizeof(sin);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int bad = 0;

		dup2(err[1], STDERR_FILENO);
		bad |= vz_direct_recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
					  NULL, NULL) >= 0 ||
		       errno != ENOTSUP;
		bad |= (vz_direct_getsockname(fd, (struct sockaddr *)&sin,
					      &len) >= 0 ||
			errno != ENOTSUP)
		       << 1;
		bad |= (vz_direct_fcntl(fd, F_DUPFD, 0) >= 0 ||
			errno != ENOTSUP)
		       << 2;
		bad |= (vz_direct_poll(&p, 1, 0) >= 0 || errno != ENOTSUP) << 3;
		bad |= (vz_direct_close(fd) != 0) << 4;
		_exit(bad);
	}
	close(err[1]);
	waitpid(pid, &st, 0);
	n = read(err[0], line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = 0;
	close(err[0]);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st),
	      "the child's calls: ENOTSUP, close works (%#x)", st);
	CHECK(strstr(line, "forked child") && strchr(line, '\n') &&
		      !strchr(strchr(line, '\n') + 1, '\n'),
	      "one line on stderr: %s", line);
	CHECK(deliver(fd, "p") && (revents(fd) & POLLIN),
	      "the parent's socket untouched");
	vz_direct_close(fd);
out:;
}

static volatile int spinners_stop;

static void *spinner(void *arg)
{
	(void)arg;
	while (!spinners_stop)
		;
	return NULL;
}

static bool never(const void *arg)
{
	(void)arg;
	return false;
}

/* More runnable threads than CPUs: a busy-poll spin does not start (one
 * look, then the caller sleeps), where it would take its whole budget.
 * Direct mode's wait spins all the same (its spinners are one per process
 * already), offering its CPU as it goes. */
static void test_no_spin_without_a_free_cpu(void)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN), i, n = ncpus + 1;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	double start;

	REQUIRE(t, "threads");
	spinners_stop = 0;
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, spinner, NULL);
	usleep(20000); /* past the once-a-millisecond look */
	CHECK(!vz_busy_cpu_free(), "%ld spinners on %ld CPUs: none free", n,
	      ncpus);
	start = now_s();
	CHECK(!vz_busy_spin(never, NULL, 500000, -1) && now_s() - start < 0.25,
	      "a 500 ms spin did not start (%.3f s)", now_s() - start);
	start = now_s();
	CHECK(!vz_busy_spin_offering(never, NULL, 100000, -1) &&
		      now_s() - start >= 0.1,
	      "a 100 ms offering spin took its budget (%.3f s)",
	      now_s() - start);
	spinners_stop = 1;
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
out:
	free(t);
}

int main(void)
{
	test_unwatched();
	test_poll_direct_only();
	test_readiness();
	test_epoll_modes();
	test_dup();
	test_close_while_waiting();
	test_fork();
	test_no_spin_without_a_free_cpu();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures != 0;
}
