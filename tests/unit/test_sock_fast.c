// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock's fast path against an in-process poller that sleeps when
 * idle, as udpd does: the doorbell that wakes it (a datagram queued while
 * it sleeps must leave at once, not at its next timeout), SO_BUSY_POLL and
 * $VZ_BUSY_POLL_US, and the message calls (vz_sendmmsg, vz_recvmmsg) with
 * good and hostile vectors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "check.h"
#include "sock/poller/server.h"
#include "veloz/sock.h"

#define LOCAL_IP htonl(0xc6120003) /* 198.18.0.3 */
/* The sleeping poller's timeout: far longer than any receive waits, so a
 * lost doorbell shows as a timed-out receive. */
#define SLEEP_MS 10000

static struct vz_sock_server *srv;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int srv_stop;
static volatile unsigned long sleeps;
static volatile int asleep; /* the poller is in (or entering) its sleep */
static char dir[64], path[128];

static int loop_send(void *opaque, const struct vz_dgram_meta *m,
		     const void *payload, size_t len)
{
	struct vz_dgram_meta back = { .src_ip = LOCAL_IP,
				      .dst_ip = LOCAL_IP,
				      .src_port = m->src_port,
				      .dst_port = m->dst_port };

	(void)opaque;
	vz_sock_server_deliver(srv, &back, payload, len);
	return 0;
}

/* udpd's loop in miniature: work while there is work, else sleep on the
 * server's descriptor (control traffic and the doorbell). */
static void *srv_main(void *arg)
{
	(void)arg;
	while (!srv_stop) {
		struct pollfd p;
		unsigned int n;

		pthread_mutex_lock(&srv_lock);
		n = vz_sock_server_poll(srv, loop_send, NULL, 256);
		pthread_mutex_unlock(&srv_lock);
		if (n)
			continue;
		p = (struct pollfd){ .fd = vz_sock_server_fd(srv),
				     .events = POLLIN };
		pthread_mutex_lock(&srv_lock);
		if (vz_sock_server_sleep_prepare(srv)) {
			pthread_mutex_unlock(&srv_lock);
			sleeps++;
			asleep = 1;
			poll(&p, 1, srv_stop ? 0 : SLEEP_MS);
			asleep = 0;
			pthread_mutex_lock(&srv_lock);
		}
		vz_sock_server_sleep_done(srv);
		pthread_mutex_unlock(&srv_lock);
	}
	return NULL;
}

static struct sockaddr_in sin_of(__be32 ip, __u16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = htons(port) };
	return sin;
}

#define SA(x) ((struct sockaddr *)&(x))

/* Blocking calls give up after 2 s (far below SLEEP_MS). */
static int bound(__u16 port)
{
	struct timeval tv = { 2, 0 };
	struct sockaddr_in sin = sin_of(0, port);
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);

	CHECK(fd >= 0, "vz_socket: %s", strerror(errno));
	CHECK(!vz_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
	      "SO_RCVTIMEO");
	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "bind %u: %s", port,
	      strerror(errno));
	return fd;
}

/* Wait (2 s at most) until the poller sleeps (it may still be on its
 * way into poll(): the doorbell's fences make that safe, and that is part
 * of what is tested). */
static int wait_asleep(void)
{
	__s64 end = (__s64)vz_now_ns() + 2000000000;

	while (!asleep && (__s64)vz_now_ns() < end)
		usleep(100);
	return asleep ? 0 : -1;
}

static void test_doorbell(void)
{
	struct sockaddr_in to = sin_of(LOCAL_IP, 6001);
	int a = bound(6001), b = bound(6002), i, lost = 0;
	char buf[64];

	/* Each exchange starts with the poller asleep: the datagram must
	 * wake it (else the receive times out after 2 s). */
	for (i = 0; i < 20; i++) {
		CHECK(!wait_asleep(), "the poller never slept");
		if (vz_sendto(b, "ding", 4, 0, SA(to), sizeof(to)) != 4 ||
		    vz_recv(a, buf, sizeof(buf), 0) != 4)
			lost++;
	}
	CHECK(!lost, "%d datagrams waited for the sleeping poller's timeout",
	      lost);
	vz_close(a);
	vz_close(b);
}

static void test_busy_poll(void)
{
	const char *env = getenv("VZ_BUSY_POLL_US");
	struct sockaddr_in to = sin_of(LOCAL_IP, 6011);
	int a = bound(6011), b = bound(6012), v, i, lost = 0;
	socklen_t len = sizeof(v);
	struct pollfd p = { .fd = a, .events = POLLIN };
	char buf[64];

	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, &len) &&
		      v == (env ? atoi(env) : 0) && len == sizeof(int),
	      "SO_BUSY_POLL starts at $VZ_BUSY_POLL_US: %d", v);
	v = 200;
	CHECK(!vz_setsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)),
	      "set SO_BUSY_POLL");
	len = sizeof(v);
	v = 0;
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, &len) && v == 200,
	      "SO_BUSY_POLL reads back %d", v);
	v = -1;
	errno = 0;
	CHECK(vz_setsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)) < 0 &&
		      errno == EINVAL,
	      "negative SO_BUSY_POLL: EINVAL (%s)", strerror(errno));
	v = 2000000;
	errno = 0;
	CHECK(vz_setsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)) < 0 &&
		      errno == EINVAL,
	      "SO_BUSY_POLL over a second: EINVAL");
	errno = 0;
	CHECK(vz_setsockopt(a, SOL_SOCKET, SO_BUSY_POLL, &v, 2) < 0 &&
		      errno == EINVAL,
	      "short SO_BUSY_POLL: EINVAL");
	/* Spinning receives and polls still get every datagram, and give
	 * up at their deadline when nothing comes. */
	for (i = 0; i < 200; i++) {
		if (vz_sendto(b, "spin", 4, 0, SA(to), sizeof(to)) != 4)
			lost++;
		else if (i % 2 && vz_poll(&p, 1, 2000) != 1)
			lost++;
		else if (vz_recv(a, buf, sizeof(buf), 0) != 4)
			lost++;
	}
	CHECK(!lost, "%d busy-polled datagrams lost", lost);
	CHECK(vz_poll(&p, 1, 1) == 0, "a busy poll times out");
	CHECK(vz_recv(a, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "nothing left");
	/* epoll spins too (the set's longest SO_BUSY_POLL, as Linux's
	 * net.core.busy_poll): every datagram reported, and a timeout kept */
	int ep = vz_epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 77 }, got;

	CHECK(ep >= 0 && !vz_epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev),
	      "epoll set: %s", strerror(errno));
	for (i = 0, lost = 0; i < 200; i++) {
		if (vz_sendto(b, "spin", 4, 0, SA(to), sizeof(to)) != 4 ||
		    vz_epoll_wait(ep, &got, 1, 2000) != 1 ||
		    got.data.u32 != 77 || vz_recv(a, buf, sizeof(buf), 0) != 4)
			lost++;
	}
	CHECK(!lost, "%d datagrams lost to a busy-polling epoll_wait", lost);
	CHECK(vz_epoll_wait(ep, &got, 1, 1) == 0,
	      "a busy epoll_wait times out");
	vz_close(ep);
	vz_close(a);
	vz_close(b);
}

#define BURST 40

/* A burst of BURST datagrams, each sent from two iovecs (the gather path)
 * and received into two (the scatter path). */
struct burst {
	struct sockaddr_in to, from[BURST];
	struct mmsghdr v[BURST], r[BURST];
	struct iovec iov[BURST][2], riov[BURST][2];
	char data[BURST][48], got[BURST][2][24];
};

static void burst_init(struct burst *t)
{
	int i;

	memset(t, 0, sizeof(*t));
	t->to = sin_of(LOCAL_IP, 6021);
	for (i = 0; i < BURST; i++) {
		memset(t->data[i], 'a' + i % 26, sizeof(t->data[i]));
		t->data[i][0] = (char)i;
		t->iov[i][0] = (struct iovec){ t->data[i], 10 };
		t->iov[i][1] = (struct iovec){ t->data[i] + 10, 38 };
		t->v[i].msg_hdr = (struct msghdr){ .msg_name = &t->to,
						   .msg_namelen = sizeof(t->to),
						   .msg_iov = t->iov[i],
						   .msg_iovlen = 2 };
		t->riov[i][0] = (struct iovec){ t->got[i][0], 24 };
		t->riov[i][1] = (struct iovec){ t->got[i][1], 24 };
		t->r[i].msg_hdr =
			(struct msghdr){ .msg_name = &t->from[i],
					 .msg_namelen = sizeof(t->from[i]),
					 .msg_iov = t->riov[i],
					 .msg_iovlen = 2 };
	}
}

/* Hostile vectors: an errno each, never a crash. */
static void check_hostile_vectors(int a, int b, struct burst *t)
{
	struct timespec ts = { 0, -1 };

	errno = 0;
	CHECK(vz_sendmmsg(b, NULL, 4, 0) < 0 && errno == EFAULT,
	      "NULL vector: EFAULT (%s)", strerror(errno));
	CHECK(vz_recvmmsg(a, NULL, 4, MSG_DONTWAIT, NULL) < 0 &&
		      errno == EFAULT,
	      "NULL receive vector: EFAULT");
	CHECK(vz_sendmmsg(b, t->v, 0, 0) == 0, "vlen 0 sends nothing");
	CHECK(vz_recvmmsg(a, t->r, 0, 0, NULL) == 0, "vlen 0 receives nothing");
	t->v[0].msg_hdr.msg_iovlen = 5000;
	errno = 0;
	CHECK(vz_sendmmsg(b, t->v, 1, 0) < 0 && errno == EMSGSIZE,
	      "iovlen over UIO_MAXIOV: EMSGSIZE (%s)", strerror(errno));
	t->v[0].msg_hdr.msg_iovlen = 2;
	t->v[0].msg_hdr.msg_iov = NULL;
	errno = 0;
	CHECK(vz_sendmmsg(b, t->v, 1, 0) < 0 && errno == EFAULT,
	      "NULL iovec: EFAULT");
	t->v[0].msg_hdr.msg_iov = t->iov[0];
	t->iov[0][1].iov_base = NULL;
	errno = 0;
	CHECK(vz_sendmmsg(b, t->v, 1, 0) < 0 && errno == EFAULT,
	      "NULL iov_base: EFAULT");
	t->iov[0][1] = (struct iovec){ t->data[0], SIZE_MAX - 4 };
	errno = 0;
	CHECK(vz_sendmmsg(b, t->v, 1, 0) < 0 && errno == EINVAL,
	      "iov_len overflow: EINVAL (%s)", strerror(errno));
	t->iov[0][1] = (struct iovec){ t->data[0], 70000 };
	errno = 0;
	CHECK(vz_sendmmsg(b, t->v, 1, 0) < 0 && errno == EMSGSIZE,
	      "70000 bytes: EMSGSIZE (%s)", strerror(errno));
	t->iov[0][1] = (struct iovec){ t->data[0] + 10, 38 };
	/* A bad second entry: the first is sent and counted. */
	t->v[1].msg_hdr.msg_iov = NULL;
	CHECK(vz_sendmmsg(b, t->v, 2, 0) == 1, "stops at the bad entry");
	t->v[1].msg_hdr.msg_iov = t->iov[1];
	CHECK(vz_recvmmsg(a, t->r, BURST, 0, &ts) < 0 && errno == EINVAL,
	      "bad timeout: EINVAL");
	t->r[0].msg_hdr.msg_iovlen = 5000;
	errno = 0;
	CHECK(vz_recvmmsg(a, t->r, 1, 0, NULL) < 0 && errno == EMSGSIZE,
	      "receive iovlen over UIO_MAXIOV: EMSGSIZE");
	t->r[0].msg_hdr.msg_iovlen = 2;
	CHECK(vz_recvmmsg(a, t->r, 1, 0, NULL) == 1 && t->r[0].msg_len == 48,
	      "the one sent before the bad entry");
	errno = 0;
	CHECK(vz_sendmmsg(12345, t->v, 1, 0) < 0 && errno == EBADF,
	      "not a descriptor: EBADF (%s)", strerror(errno));
	CHECK(vz_sendmsg(b, NULL, 0) < 0 && errno == EFAULT,
	      "NULL msghdr: EFAULT");
	CHECK(vz_recvmsg(a, NULL, 0) < 0 && errno == EFAULT,
	      "NULL receive msghdr: EFAULT");
}

/* vlen far over UIO_MAXIOV is capped, as Linux does: a vector of 1024 is
 * never read past. */
static void check_huge_vlen(int b, struct burst *t)
{
	static struct mmsghdr big[1024];
	struct iovec one = { t->data[0], 1 };
	int i, sent;

	for (i = 0; i < 1024; i++)
		big[i].msg_hdr = (struct msghdr){ .msg_name = &t->to,
						  .msg_namelen = sizeof(t->to),
						  .msg_iov = &one,
						  .msg_iovlen = 1 };
	sent = vz_sendmmsg(b, big, UINT_MAX, MSG_DONTWAIT);
	CHECK(sent > 0 && sent <= 1024, "huge vlen capped: %d", sent);
}

static void test_mmsg(void)
{
	static struct burst t;
	int a = bound(6021), b = bound(6022), i, n, bad = 0;

	burst_init(&t);
	n = vz_sendmmsg(b, t.v, BURST, 0);
	CHECK(n == BURST, "sendmmsg sent %d: %s", n, strerror(errno));
	for (i = 0; i < BURST; i++)
		CHECK(t.v[i].msg_len == 48, "msg_len %u", t.v[i].msg_len);
	/* The first waits, the rest are taken as queued. */
	for (n = 0; n < BURST;) {
		int k = vz_recvmmsg(a, t.r + n, BURST - n, MSG_WAITFORONE,
				    NULL);

		if (k <= 0) {
			CHECK(0, "recvmmsg: %s", strerror(errno));
			break;
		}
		n += k;
	}
	for (i = 0; i < n; i++)
		if (t.r[i].msg_len != 48 || memcmp(t.got[i], t.data[i], 48) ||
		    t.r[i].msg_hdr.msg_namelen != sizeof(t.from[i]) ||
		    ntohs(t.from[i].sin_port) != 6022)
			bad++;
	CHECK(n == BURST && !bad, "%d of %d received whole, in order", n - bad,
	      BURST);
	check_hostile_vectors(a, b, &t);
	check_huge_vlen(b, &t);
	vz_close(a);
	vz_close(b);
}

int main(void)
{
	struct vz_sock_server_config cfg = { .gid = getgid(),
					     .local_ip4 = LOCAL_IP };
	pthread_t th;
	char err[256];

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/vz-sockf-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/run/udpd.sock", dir);
	cfg.path = path;
	srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "server: %s\n", err);
		return 1;
	}
	pthread_create(&th, NULL, srv_main, NULL);
	CHECK(!vz_sock_init(path), "vz_sock_init: %s", strerror(errno));

	test_doorbell();
	test_busy_poll();
	test_mmsg();

	srv_stop = 1;
	vz_sock_exit(); /* the hang-up wakes the poller */
	pthread_join(th, NULL);
	vz_sock_server_free(srv);
	snprintf(err, sizeof(err), "%s/run", dir);
	rmdir(err);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
