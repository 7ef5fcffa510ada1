// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock's epoll against the poller's socket table (sock_harness.h):
 * level and edge triggering, and its errors, kernel and veloz fds mixed.
 */
#include "sock_harness.h"

static int ep_wait(int ep, struct epoll_event *ev, int max, int ms)
{
	return vz_epoll_wait(ep, ev, max, ms);
}

static void *send_later(void *arg)
{
	int b = *(int *)arg;

	/* Not a synchronisation: only makes the sleeping path likely. */
	usleep(20000);
	CHECK(send_to(b, "late", 4, 5030) == 4, "send from a thread");
	return NULL;
}

static void test_epoll_levels(int ep, int a, int b, int p[2])
{
	struct epoll_event ev[4];
	pthread_t th;
	double t;
	char c[8];
	int n;

	/* Level-triggered: reported until read. */
	CHECK(send_to(b, "x", 1, 5030) == 1, "send");
	n = ep_wait(ep, ev, 4, 2000);
	CHECK(n == 1 && ev[0].events == EPOLLIN && ev[0].data.u64 == 0xa11ce,
	      "LT: the veloz socket (%d %#x)", n, n > 0 ? ev[0].events : 0);
	CHECK(ep_wait(ep, ev, 4, 0) == 1, "LT: again, still unread");
	CHECK(vz_recv(a, c, sizeof(c), 0) == 1, "recv");
	t = vz_now_s();
	CHECK(ep_wait(ep, ev, 4, 50) == 0, "LT: nothing after the read");
	CHECK(vz_now_s() - t >= 0.045, "waited its timeout");
	/* A kernel member and a veloz one, both ready: both reported. */
	CHECK(write(p[1], "k", 1) == 1 && send_to(b, "y", 1, 5030) == 1,
	      "send both");
	CHECK(vz_poll(&(struct pollfd){ .fd = a, .events = POLLIN }, 1, 2000) ==
		      1,
	      "delivered");
	CHECK(ep_wait(ep, ev, 1, 2000) == 1, "one at a time");
	n = ep_wait(ep, ev, 4, 2000);
	CHECK(n == 2 && ev[0].data.u64 != ev[1].data.u64, "both (%d)", n);
	/* maxevents 1, both ready: turns alternate, neither starves. */
	n = ep_wait(ep, ev, 1, 0);
	CHECK(n == 1 && ep_wait(ep, ev + 1, 1, 0) == 1 &&
		      ev[0].data.u64 != ev[1].data.u64,
	      "maxevents 1: both in two calls");
	CHECK(read(p[0], c, 1) == 1 && vz_recv(a, c, sizeof(c), 0) == 1,
	      "drain");
	/* Asleep in epoll_wait: the poller's wake-up ends it. */
	pthread_create(&th, NULL, send_later, &b);
	t = vz_now_s();
	n = ep_wait(ep, ev, 4, 2000);
	CHECK(n == 1 && ev[0].data.u64 == 0xa11ce && vz_now_s() - t < 1.9,
	      "woken by a datagram (%d)", n);
	pthread_join(th, NULL);
	CHECK(vz_recv(a, c, sizeof(c), 0) == 4, "recv late");
}

static void test_epoll_edges(int ep, int a, int b)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLET, .data.u64 = 7 };
	struct epoll_event ev[4];
	char c[8];
	int n;

	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_MOD, a, &e), "MOD to ET: %s",
	      strerror(errno));
	CHECK(ep_wait(ep, ev, 4, 0) == 0, "ET: nothing yet");
	CHECK(send_to(b, "1", 1, 5030) == 1, "send");
	n = ep_wait(ep, ev, 4, 2000);
	CHECK(n == 1 && ev[0].data.u64 == 7 && ev[0].events == EPOLLIN,
	      "ET: reported on arrival");
	CHECK(ep_wait(ep, ev, 4, 0) == 0, "ET: once per arrival, unread");
	CHECK(send_to(b, "2", 1, 5030) == 1, "send 2");
	/* A new arrival is a new edge, though the ring was not empty. */
	CHECK(ep_wait(ep, ev, 4, 2000) == 1, "ET: the second arrival");
	CHECK(vz_recv(a, c, 1, 0) == 1 && vz_recv(a, c, 1, 0) == 1, "drain");
	CHECK(ep_wait(ep, ev, 4, 0) == 0, "ET: reading is no edge");

	/* One-shot: once, then silent until re-armed with MOD. */
	e.events = EPOLLIN | EPOLLONESHOT;
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_MOD, a, &e), "MOD to ONESHOT");
	CHECK(send_to(b, "3", 1, 5030) == 1, "send 3");
	CHECK(ep_wait(ep, ev, 4, 2000) == 1, "ONESHOT: reported");
	CHECK(ep_wait(ep, ev, 4, 0) == 0, "ONESHOT: disarmed");
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_MOD, a, &e), "re-arm");
	CHECK(ep_wait(ep, ev, 4, 0) == 1, "ONESHOT: re-armed, still unread");
	CHECK(vz_recv(a, c, 1, 0) == 1, "drain 3");

	/* EPOLLOUT: writable at once; edge-triggered, once. */
	e.events = EPOLLOUT | EPOLLET;
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_MOD, a, &e), "MOD to OUT|ET");
	n = ep_wait(ep, ev, 4, 0);
	CHECK(n == 1 && ev[0].events == EPOLLOUT, "EPOLLOUT (%d)", n);
	CHECK(ep_wait(ep, ev, 4, 0) == 0, "EPOLLOUT|ET: once");
}

static void test_epoll_errors(int ep, int a, int p[2])
{
	struct epoll_event e = { .events = EPOLLIN }, ev[2];
	int ep2 = vz_epoll_create1(0);

	CHECK(vz_epoll_ctl(ep, EPOLL_CTL_ADD, a, &e) == -1 && errno == EEXIST,
	      "ADD twice: EEXIST (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep2, EPOLL_CTL_MOD, a, &e) == -1 && errno == ENOENT,
	      "MOD of a non-member: ENOENT (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep2, EPOLL_CTL_DEL, a, NULL) == -1 &&
		      errno == ENOENT,
	      "DEL of a non-member: ENOENT (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(a, EPOLL_CTL_ADD, a, &e) == -1 && errno == EINVAL,
	      "a socket as the set: EINVAL (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(p[0], EPOLL_CTL_ADD, a, &e) == -1 && errno == EINVAL,
	      "a pipe as the set: EINVAL (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(1000000, EPOLL_CTL_ADD, a, &e) == -1 &&
		      errno == EBADF,
	      "no such set: EBADF (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep, EPOLL_CTL_ADD, 1000000, &e) == -1 &&
		      errno == EBADF,
	      "no such descriptor: EBADF (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep2, EPOLL_CTL_ADD, a, NULL) == -1 &&
		      errno == EFAULT,
	      "no event: EFAULT (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep2, 99, a, &e) == -1 && errno == EINVAL,
	      "unknown op: EINVAL (%s)", strerror(errno));
	CHECK(vz_epoll_ctl(ep, EPOLL_CTL_ADD, ep, &e) == -1 && errno == EINVAL,
	      "the set in itself: EINVAL (%s)", strerror(errno));
	e.events = EPOLLIN | EPOLLEXCLUSIVE;
	CHECK(!vz_epoll_ctl(ep2, EPOLL_CTL_ADD, a, &e), "EXCLUSIVE: %s",
	      strerror(errno));
	CHECK(vz_epoll_ctl(ep2, EPOLL_CTL_MOD, a, &e) == -1 && errno == EINVAL,
	      "EXCLUSIVE with MOD: EINVAL (%s)", strerror(errno));
	e.events = EPOLLIN;
	/* Sets in each other: the kernel's ELOOP, a veloz member or not. */
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_ADD, ep2, &e), "nest: %s",
	      strerror(errno));
	CHECK(vz_epoll_ctl(ep2, EPOLL_CTL_ADD, ep, &e) == -1 && errno == ELOOP,
	      "a loop: ELOOP (%s)", strerror(errno));
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_DEL, ep2, NULL), "unnest");
	CHECK(vz_epoll_wait(ep, ev, 0, 0) == -1 && errno == EINVAL,
	      "maxevents 0: EINVAL");
	CHECK(vz_epoll_wait(ep, NULL, 2, 0) == -1 && errno == EFAULT,
	      "no events: EFAULT");
	CHECK(vz_epoll_wait(p[0], ev, 2, 0) == -1 && errno == EINVAL,
	      "wait on a pipe: EINVAL");
	CHECK(vz_epoll_wait(1000000, ev, 2, 0) == -1 && errno == EBADF,
	      "wait on nothing: EBADF");
	CHECK(vz_is_epoll(ep2) && !vz_close(ep2) && !vz_is_epoll(ep2) &&
		      fcntl(ep2, F_GETFD) < 0,
	      "vz_close of a set");
}

static void test_epoll(void)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = 0xa11ce };
	struct epoll_event pe = { .events = EPOLLIN, .data.u64 = 0x919e };
	int a = bound(5030), b = udp(), p[2],
	    ep = vz_epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev[2];

	CHECK(ep >= 0 && (fcntl(ep, F_GETFD) & FD_CLOEXEC), "epoll_create1");
	CHECK(!pipe(p), "pipe");
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_ADD, a, &e), "ADD veloz: %s",
	      strerror(errno));
	CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &pe), "ADD pipe: %s",
	      strerror(errno));
	test_epoll_levels(ep, a, b, p);
	test_epoll_errors(ep, a, p);
	test_epoll_edges(ep, a, b);
	/* An error is reported whether asked for or not, as Linux's
	 * EPOLLERR, until SO_ERROR takes it. */
	{
		struct sockaddr_in far = sin_of(htonl(0xc0000201), 53);
		struct vz_sock_server_stats s0 = stats();
		struct epoll_event none = { .events = 0, .data.u64 = 0xe },
				   got[2];
		int c = udp(), err = 0;
		socklen_t len = sizeof(err);

		CHECK(!vz_epoll_ctl(ep, EPOLL_CTL_ADD, c, &none), "ADD c");
		CHECK(vz_epoll_wait(ep, got, 2, 0) == 0, "no error yet");
		CHECK(vz_sendto(c, "x", 1, 0, SA(far), sizeof(far)) == 1,
		      "queued");
		CHECK(!WAIT_STAT(tx_errors, s0.tx_errors + 1), "refused");
		CHECK(vz_epoll_wait(ep, got, 2, 2000) == 1 &&
			      got[0].events == EPOLLERR &&
			      got[0].data.u64 == 0xe,
		      "EPOLLERR, not asked for");
		CHECK(!vz_getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) &&
			      err == ENETUNREACH &&
			      vz_epoll_wait(ep, got, 2, 0) == 0,
		      "gone once taken");
		vz_close(c);
	}
	/* A closed socket leaves every set (its last descriptor). */
	CHECK(!vz_close(a), "close");
	CHECK(vz_epoll_wait(ep, ev, 2, 0) == 0, "the closed member is gone");
	CHECK(!vz_close(ep) && !vz_is_epoll(ep), "close the set");
	vz_close(b);
	close(p[0]);
	close(p[1]);
}

/* ---- AF_INET6 ---- */

int main(void)
{
	if (sock_harness_start())
		return 1;
	test_epoll();
	return sock_harness_stop();
}
