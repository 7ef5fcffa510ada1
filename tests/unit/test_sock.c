// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock against the poller's socket table, without a network: the
 * server runs in a thread on a temporary path, with a send callback that
 * loops datagrams for the stack's own address back through deliver() (as
 * if they came from the stack's address) and refuses any other destination
 * with ENETUNREACH. The application side is this process, plus forked
 * children where processes matter (death, credentials).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sock/lib/proto.h"
#include "sock/lib/ring.h"
#include "sock/lib/server.h"
#include "veloz/sock.h"

#define LOCAL_IP htonl(0x0a000001) /* 10.0.0.1, the stack's */
static const __u8 local_ip6[16] = { 0xfd, [15] = 1 }; /* fd00::1 */
#define MAX_SOCKETS 64

static struct vz_sock_server *srv;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int srv_stop;
static char dir[64], path[128];

static int loop_send(void *opaque, const struct vz_dgram_meta *m,
		     const void *payload, size_t len)
{
	struct vz_dgram_meta back = { .src_ip = LOCAL_IP,
				      .dst_ip = LOCAL_IP,
				      .src_port = m->src_port,
				      .dst_port = m->dst_port };

	(void)opaque;
	if (m->v6) {
		struct vz_dgram_meta back6 = { .v6 = 1,
					       .src_port = m->src_port,
					       .dst_port = m->dst_port };

		if (memcmp(m->dst_ip6, local_ip6, 16))
			return -ENETUNREACH;
		CHECK(!memcmp(m->src_ip6, local_ip6, 16) || !m->src_ip6[0],
		      "IPv6 source ours or the stack's to fill");
		memcpy(back6.src_ip6, local_ip6, 16);
		memcpy(back6.dst_ip6, local_ip6, 16);
		vz_sock_server_deliver(srv, &back6, payload, len);
		return 0;
	}
	if (m->dst_ip != LOCAL_IP)
		return -ENETUNREACH;
	CHECK(m->src_ip == LOCAL_IP && m->src_port, "source filled");
	vz_sock_server_deliver(srv, &back, payload, len);
	return 0;
}

static void *srv_main(void *arg)
{
	(void)arg;
	while (!srv_stop) {
		unsigned int n;

		pthread_mutex_lock(&srv_lock);
		n = vz_sock_server_poll(srv, loop_send, NULL, 256);
		pthread_mutex_unlock(&srv_lock);
		if (!n)
			usleep(200);
	}
	return NULL;
}

static struct vz_sock_server_stats stats(void)
{
	struct vz_sock_server_stats s;

	pthread_mutex_lock(&srv_lock);
	s = *vz_sock_server_get_stats(srv);
	pthread_mutex_unlock(&srv_lock);
	return s;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait (up to 2 s) until the stats counter at `off` reaches `want`. */
static int wait_stat(size_t off, __u64 want)
{
	double end = now_s() + 2;

	while (now_s() < end) {
		struct vz_sock_server_stats s = stats();

		if (*(__u64 *)((char *)&s + off) >= want)
			return 0;
		usleep(1000);
	}
	return -1;
}

#define WAIT_STAT(field, want) \
	wait_stat(offsetof(struct vz_sock_server_stats, field), (want))

static struct sockaddr_in sin_of(__be32 ip, __u16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = htons(port) };
	return sin;
}

#define SA(x) ((struct sockaddr *)&(x))

/* A socket whose blocking calls give up after 2 s, so no test hangs. */
static int udp(void)
{
	struct timeval tv = { 2, 0 };
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);

	CHECK(fd >= 0, "vz_socket: %s", strerror(errno));
	CHECK(!vz_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
	      "SO_RCVTIMEO");
	CHECK(!vz_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)),
	      "SO_SNDTIMEO");
	return fd;
}

static int bound(__u16 port)
{
	struct sockaddr_in sin = sin_of(0, port);
	int fd = udp();

	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "bind %u: %s", port,
	      strerror(errno));
	return fd;
}

static __u16 port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	CHECK(!vz_getsockname(fd, SA(sin), &len), "getsockname");
	return ntohs(sin.sin_port);
}

static ssize_t send_to(int fd, const void *buf, size_t len, __u16 port)
{
	struct sockaddr_in to = sin_of(LOCAL_IP, port);

	return vz_sendto(fd, buf, len, 0, SA(to), sizeof(to));
}

static void test_errors(void)
{
	struct sockaddr_in sin = sin_of(htonl(0x0a090909), 7000), got;
	socklen_t len = sizeof(got);
	int fd, p[2], v;
	char big[VZ_STACK_MAX_UDP + 1] = { 0 };

	errno = 0;
	CHECK(vz_socket(AF_UNIX, SOCK_DGRAM, 0) < 0 && errno == EAFNOSUPPORT,
	      "AF_UNIX: %s", strerror(errno));
	CHECK(vz_socket(AF_INET, SOCK_STREAM, 0) < 0 &&
		      errno == EPROTONOSUPPORT,
	      "SOCK_STREAM: %s", strerror(errno));
	CHECK(vz_socket(AF_INET, SOCK_RAW, 0) < 0 && errno == ESOCKTNOSUPPORT,
	      "SOCK_RAW: %s", strerror(errno));
	CHECK(vz_socket(AF_INET, SOCK_DGRAM, IPPROTO_TCP) < 0 &&
		      errno == EPROTONOSUPPORT,
	      "IPPROTO_TCP");
	CHECK(vz_bind(-1, SA(sin), sizeof(sin)) < 0 && errno == EBADF, "EBADF");
	CHECK(!pipe(p), "pipe");
	CHECK(vz_recv(p[0], big, 1, 0) < 0 && errno == ENOTSOCK, "ENOTSOCK");
	CHECK(!vz_is_socket(p[0]), "a pipe is no veloz socket");
	close(p[0]);
	close(p[1]);

	fd = udp();
	CHECK(vz_is_socket(fd), "vz_is_socket");
	CHECK(!vz_getsockname(fd, SA(got), &len) && !got.sin_port &&
		      !got.sin_addr.s_addr,
	      "unbound name 0.0.0.0:0");
	CHECK(vz_getpeername(fd, SA(got), &len) < 0 && errno == ENOTCONN,
	      "ENOTCONN");
	CHECK(vz_send(fd, "x", 1, 0) < 0 && errno == EDESTADDRREQ,
	      "EDESTADDRREQ");
	CHECK(send_to(fd, big, sizeof(big), 7000) < 0 && errno == EMSGSIZE,
	      "EMSGSIZE");
	CHECK(send_to(fd, "x", 1, 0) < 0 && errno == EINVAL, "port 0");
	CHECK(vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EADDRNOTAVAIL,
	      "EADDRNOTAVAIL: %s", strerror(errno));
	CHECK(vz_bind(fd, SA(sin), 4) < 0 && errno == EINVAL, "short addr");
	sin = sin_of(LOCAL_IP, 7000);
	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "bind the stack's address");
	CHECK(vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EINVAL,
	      "bound twice");
	len = sizeof(got);
	CHECK(!vz_getsockname(fd, SA(got), &len) &&
		      got.sin_port == htons(7000) &&
		      got.sin_addr.s_addr == LOCAL_IP,
	      "name after bind");
	len = sizeof(v);
	CHECK(!vz_getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) &&
		      v == SOCK_DGRAM,
	      "SO_TYPE");
	CHECK(!vz_getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) &&
		      v == AF_INET,
	      "SO_DOMAIN");
	CHECK(vz_setsockopt(fd, IPPROTO_IP, 1, &v, sizeof(v)) < 0 &&
		      errno == ENOPROTOOPT,
	      "ENOPROTOOPT");
	/* IP_MTU_DISCOVER: DONT and OMIT are what the stack does (it never
	 * sets DF); modes that need DF are refused, nonsense is EINVAL */
	v = IP_PMTUDISC_OMIT;
	CHECK(!vz_setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)),
	      "IP_PMTUDISC_OMIT: %s", strerror(errno));
	v = IP_PMTUDISC_DONT;
	CHECK(!vz_setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)),
	      "IP_PMTUDISC_DONT: %s", strerror(errno));
	v = IP_PMTUDISC_DO;
	CHECK(vz_setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)) <
			      0 &&
		      errno == EOPNOTSUPP,
	      "IP_PMTUDISC_DO refused");
	v = 99;
	CHECK(vz_setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)) <
			      0 &&
		      errno == EINVAL,
	      "IP_MTU_DISCOVER 99: EINVAL");
	CHECK(vz_setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, 1) < 0 &&
		      errno == EINVAL,
	      "IP_MTU_DISCOVER short: EINVAL");
	v = -1;
	len = sizeof(v);
	CHECK(!vz_getsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, &len) &&
		      v == IP_PMTUDISC_DONT && len == sizeof(v),
	      "IP_MTU_DISCOVER reads DONT");
	len = sizeof(v);
	CHECK(!vz_close(fd), "close");
	CHECK(vz_close(fd) < 0 && errno == EBADF, "closed twice");
}

static void test_roundtrip(void)
{
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	char buf[4096], want[4096];
	int a = bound(5001), b = udp(), i, bad = 0;
	__u16 pb;

	CHECK(send_to(b, "hello", 5, 5001) == 5, "sendto: %s", strerror(errno));
	pb = port_of(b);
	CHECK(pb >= 32768 && pb <= 60999, "ephemeral port %u", pb);
	CHECK(vz_recvfrom(a, buf, sizeof(buf), 0, SA(from), &flen) == 5 &&
		      !memcmp(buf, "hello", 5),
	      "recvfrom: %s", strerror(errno));
	CHECK(from.sin_addr.s_addr == LOCAL_IP && ntohs(from.sin_port) == pb &&
		      flen == sizeof(from),
	      "sender");
	CHECK(vz_sendto(a, "world", 5, 0, SA(from), flen) == 5, "reply");
	CHECK(vz_recv(b, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "world", 5),
	      "reply received");
	CHECK(port_of(a) == 5001, "getsockname");

	/* Sizes that wrap the rings many times, each byte checked. */
	for (i = 0; i < 1500; i++) {
		size_t len = (size_t)(i * 37) % sizeof(want);
		ssize_t n;

		memset(want, i & 0xff, len);
		if (send_to(b, want, len, 5001) != (ssize_t)len) {
			bad++;
			continue;
		}
		n = vz_recv(a, buf, sizeof(buf), 0);
		if (n != (ssize_t)len || memcmp(buf, want, len))
			bad++;
	}
	CHECK(!bad, "%d datagrams lost or changed", bad);
	vz_close(a);
	vz_close(b);
}

/* Datagrams each of `n` fresh senders sent to `port`, received by a, b. */
static void spread(__u16 port, int a, int b, int *na, int *nb)
{
	char buf[16];
	int i, s[32];
	double end;

	*na = *nb = 0;
	for (i = 0; i < 32; i++) {
		s[i] = udp();
		CHECK(send_to(s[i], "s", 1, port) == 1, "send");
	}
	end = now_s() + 2;
	while (*na + *nb < 32 && now_s() < end) {
		while (vz_recv(a, buf, sizeof(buf), MSG_DONTWAIT) == 1)
			(*na)++;
		while (vz_recv(b, buf, sizeof(buf), MSG_DONTWAIT) == 1)
			(*nb)++;
		usleep(1000);
	}
	for (i = 0; i < 32; i++)
		vz_close(s[i]);
}

static int reuse(int opt)
{
	int fd = udp(), one = 1;

	CHECK(!vz_setsockopt(fd, SOL_SOCKET, opt, &one, sizeof(one)),
	      "set reuse");
	return fd;
}

static void test_reuse(void)
{
	struct sockaddr_in sin = sin_of(0, 5002);
	int a = bound(5002), b = udp(), c, d, na, nb, v;
	socklen_t len = sizeof(v);

	CHECK(vz_bind(b, SA(sin), sizeof(sin)) < 0 && errno == EADDRINUSE,
	      "EADDRINUSE: %s", strerror(errno));
	vz_close(a);
	CHECK(!vz_bind(b, SA(sin), sizeof(sin)), "close frees the port");
	vz_close(b);

	sin = sin_of(0, 5003);
	c = reuse(SO_REUSEADDR);
	d = reuse(SO_REUSEADDR);
	CHECK(!vz_getsockopt(c, SOL_SOCKET, SO_REUSEADDR, &v, &len) && v == 1,
	      "SO_REUSEADDR read back");
	CHECK(!vz_bind(c, SA(sin), sizeof(sin)) &&
		      !vz_bind(d, SA(sin), sizeof(sin)),
	      "both SO_REUSEADDR: %s", strerror(errno));
	vz_close(c);
	vz_close(d);

	sin = sin_of(0, 5004);
	c = reuse(SO_REUSEPORT);
	d = reuse(SO_REUSEPORT);
	a = udp();
	CHECK(!vz_bind(c, SA(sin), sizeof(sin)) &&
		      !vz_bind(d, SA(sin), sizeof(sin)),
	      "both SO_REUSEPORT: %s", strerror(errno));
	CHECK(vz_bind(a, SA(sin), sizeof(sin)) < 0 && errno == EADDRINUSE,
	      "a third without the option");
	spread(5004, c, d, &na, &nb);
	CHECK(na + nb == 32 && na && nb, "spread %d + %d", na, nb);
	vz_close(a);
	vz_close(c);
	vz_close(d);
}

static void test_connect(void)
{
	struct sockaddr_in peer, got;
	socklen_t len = sizeof(got);
	int a = bound(5005), b = udp(), c = udp();
	char buf[8];

	CHECK(send_to(b, "b", 1, 5005) == 1 && vz_recv(a, buf, 8, 0) == 1,
	      "b reaches a");
	peer = sin_of(LOCAL_IP, port_of(b));
	CHECK(!vz_connect(a, SA(peer), sizeof(peer)), "connect");
	CHECK(!vz_getpeername(a, SA(got), &len) &&
		      got.sin_port == peer.sin_port,
	      "getpeername");
	len = sizeof(got);
	CHECK(!vz_getsockname(a, SA(got), &len) &&
		      got.sin_addr.s_addr == LOCAL_IP,
	      "connected: the stack's address as name");
	CHECK(send_to(c, "c", 1, 5005) == 1, "c sends");
	CHECK(send_to(b, "B", 1, 5005) == 1, "b sends");
	CHECK(vz_recv(a, buf, 8, 0) == 1 && buf[0] == 'B', "only b's");
	usleep(20000);
	CHECK(vz_recv(a, buf, 8, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "c's filtered");
	CHECK(vz_send(a, "r", 1, 0) == 1 && vz_recv(b, buf, 8, 0) == 1 &&
		      buf[0] == 'r',
	      "send to the peer");
	peer.sin_family = AF_UNSPEC;
	CHECK(!vz_connect(a, SA(peer), sizeof(peer)), "dissolve");
	CHECK(vz_getpeername(a, SA(got), &len) < 0 && errno == ENOTCONN,
	      "no peer");
	CHECK(send_to(c, "c", 1, 5005) == 1 && vz_recv(a, buf, 8, 0) == 1,
	      "c reaches a again");
	vz_close(a);
	vz_close(b);
	vz_close(c);
}

static void test_nonblock_timeout(void)
{
	struct timeval tv = { 0, 200000 }, got;
	socklen_t len = sizeof(got);
	int a = vz_socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	double t;
	char buf[8];

	CHECK(vz_fcntl(a, F_GETFL, 0) & O_NONBLOCK, "F_GETFL");
	t = now_s();
	CHECK(vz_recv(a, buf, 8, 0) < 0 && errno == EAGAIN, "EAGAIN");
	CHECK(now_s() - t < 0.05, "at once");
	CHECK(!vz_fcntl(a, F_SETFL, 0) &&
		      !(vz_fcntl(a, F_GETFL, 0) & O_NONBLOCK),
	      "F_SETFL");
	CHECK(vz_recv(a, buf, 8, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "MSG_DONTWAIT");
	CHECK(!vz_setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
	      "SO_RCVTIMEO");
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &got, &len) &&
		      got.tv_usec == 200000,
	      "SO_RCVTIMEO read back");
	t = now_s();
	CHECK(vz_recv(a, buf, 8, 0) < 0 && errno == EAGAIN, "timed out");
	t = now_s() - t;
	CHECK(t >= 0.19 && t < 1.5, "after %.3f s", t);
	vz_close(a);
}

static void test_trunc_peek(void)
{
	int a = bound(5006), b = udp();
	char big[100], buf[10];

	memset(big, 'z', sizeof(big));
	CHECK(send_to(b, big, sizeof(big), 5006) == 100, "send 100");
	CHECK(vz_recv(a, buf, 10, MSG_PEEK) == 10, "peek");
	CHECK(vz_recv(a, buf, 10, MSG_PEEK | MSG_TRUNC) == 100,
	      "MSG_TRUNC: the real length");
	CHECK(vz_recv(a, buf, 10, 0) == 10 && buf[9] == 'z', "truncated");
	CHECK(vz_recv(a, buf, 10, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "consumed");
	/* Zero-length reads without a buffer, as Linux allows: the datagram
	 * is consumed, MSG_TRUNC gives its length. */
	CHECK(send_to(b, big, 7, 5006) == 7 && send_to(b, big, 9, 5006) == 9,
	      "send 7, 9");
	CHECK(vz_recv(a, NULL, 0, MSG_PEEK | MSG_TRUNC) == 7, "peek NULL, 0");
	CHECK(vz_recv(a, NULL, 0, MSG_TRUNC) == 7, "NULL, 0, MSG_TRUNC");
	CHECK(vz_recvfrom(a, NULL, 0, 0, NULL, NULL) == 0, "NULL, 0");
	CHECK(vz_recv(a, buf, 10, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "both consumed");
	vz_close(a);
	vz_close(b);
}

static void test_ring_full(void)
{
	struct vz_sock_server_stats s0 = stats();
	int a = bound(5007), b = udp(), v = 4096, i, got = 0;
	socklen_t len = sizeof(v);
	char buf[1000] = { 0 };

	CHECK(!vz_setsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)),
	      "SO_RCVBUF: %s", strerror(errno));
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, &len) && v == 4096,
	      "SO_RCVBUF read back %d", v);
	for (i = 0; i < 20; i++)
		CHECK(send_to(b, buf, sizeof(buf), 5007) == 1000, "send");
	CHECK(!WAIT_STAT(tx_sent, s0.tx_sent + 20), "sent");
	CHECK(stats().rx_ring_full >= s0.rx_ring_full + 16, "ring full: %llu",
	      (unsigned long long)(stats().rx_ring_full - s0.rx_ring_full));
	v = 8192;
	CHECK(vz_setsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0 &&
		      errno == EBUSY,
	      "resize a ring holding data: EBUSY");
	while (vz_recv(a, buf, sizeof(buf), MSG_DONTWAIT) == 1000)
		got++;
	CHECK(got >= 1 && got <= 4, "%d fit", got);
	CHECK(!vz_setsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)),
	      "resize when empty");
	CHECK(send_to(b, buf, 10, 5007) == 10 && vz_recv(a, buf, 100, 0) == 10,
	      "works after the resize");
	vz_close(a);
	vz_close(b);
}

static void test_so_error(void)
{
	struct vz_sock_server_stats s0 = stats();
	struct pollfd p;
	int a = udp(), err = 0;
	socklen_t len = sizeof(err);
	struct sockaddr_in far = sin_of(htonl(0xc0000201), 53);
	char buf[8];

	CHECK(vz_sendto(a, "x", 1, 0, SA(far), sizeof(far)) == 1, "queued");
	CHECK(!WAIT_STAT(tx_errors, s0.tx_errors + 1), "refused");
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_ERROR, &err, &len) &&
		      err == ENETUNREACH,
	      "SO_ERROR %d", err);
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_ERROR, &err, &len) && !err,
	      "cleared");
	CHECK(vz_sendto(a, "x", 1, 0, SA(far), sizeof(far)) == 1, "queued");
	CHECK(!WAIT_STAT(tx_errors, s0.tx_errors + 2), "refused");
	p = (struct pollfd){ .fd = a, .events = POLLIN };
	CHECK(vz_poll(&p, 1, 0) == 1 && (p.revents & POLLERR), "POLLERR");
	CHECK(vz_recv(a, buf, 8, 0) < 0 && errno == ENETUNREACH,
	      "recv reports it");
	vz_close(a);
}

static void test_poll_select(void)
{
	int a = bound(5008), b = udp(), p[2], i;
	struct pollfd fds[2];
	struct timeval tv = { 0, 50000 };
	fd_set rd, wr;
	double t;
	char c;

	CHECK(!pipe(p), "pipe");
	fds[0] = (struct pollfd){ .fd = a, .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	t = now_s();
	CHECK(vz_poll(fds, 2, 50) == 0, "nothing ready");
	CHECK(now_s() - t >= 0.045, "waited");
	CHECK(write(p[1], "k", 1) == 1, "write");
	CHECK(vz_poll(fds, 2, 1000) == 1 && fds[1].revents == POLLIN &&
		      !fds[0].revents,
	      "the pipe");
	CHECK(read(p[0], &c, 1) == 1, "read");
	CHECK(send_to(b, "d", 1, 5008) == 1, "send");
	/* Sleeps in poll() until the poller delivers and wakes it. */
	CHECK(vz_poll(fds, 2, 2000) == 1 && fds[0].revents == POLLIN &&
		      !fds[1].revents,
	      "the veloz socket");
	fds[0].events = POLLOUT;
	CHECK(vz_poll(fds, 1, 0) == 1 && fds[0].revents == POLLOUT, "POLLOUT");

	FD_ZERO(&rd);
	FD_SET(a, &rd);
	FD_SET(p[0], &rd);
	CHECK(vz_select((a > p[0] ? a : p[0]) + 1, &rd, NULL, NULL, &tv) == 1 &&
		      FD_ISSET(a, &rd) && !FD_ISSET(p[0], &rd),
	      "select: the veloz socket");
	CHECK(vz_recv(a, &c, 1, 0) == 1, "recv");
	FD_ZERO(&rd);
	FD_SET(a, &rd);
	FD_SET(p[0], &rd);
	FD_ZERO(&wr);
	FD_SET(b, &wr);
	CHECK(write(p[1], "k", 1) == 1, "write");
	i = vz_select(FD_SETSIZE, &rd, &wr, NULL, &tv);
	CHECK(i == 2 && !FD_ISSET(a, &rd) && FD_ISSET(p[0], &rd) &&
		      FD_ISSET(b, &wr),
	      "select: the pipe and a writable socket (%d)", i);

	/* A veloz socket ready at once must not hide a ready kernel one. */
	CHECK(send_to(b, "e", 1, 5008) == 1, "send");
	fds[0] = (struct pollfd){ .fd = a, .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	CHECK(vz_poll(fds, 1, 2000) == 1, "delivered");
	i = vz_poll(fds, 2, 1000);
	CHECK(i == 2 && fds[0].revents == POLLIN && fds[1].revents == POLLIN,
	      "poll: both ready (%d: %#x %#x)", i, fds[0].revents,
	      fds[1].revents);
	i = vz_poll(fds, 2, 0);
	CHECK(i == 2 && fds[0].revents == POLLIN && fds[1].revents == POLLIN,
	      "poll, timeout 0: both ready (%d)", i);
	FD_ZERO(&rd);
	FD_SET(a, &rd);
	FD_SET(p[0], &rd);
	i = vz_select((a > p[0] ? a : p[0]) + 1, &rd, NULL, NULL, &tv);
	CHECK(i == 2 && FD_ISSET(a, &rd) && FD_ISSET(p[0], &rd),
	      "select: both ready (%d)", i);
	CHECK(vz_recv(a, &c, 1, 0) == 1 && read(p[0], &c, 1) == 1, "drain");
	close(p[0]);
	close(p[1]);
	vz_close(a);
	vz_close(b);
}

/* ---- epoll ---- */

/* epoll_wait into ev[]: the count; the data of the first in *fd. */
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
	t = now_s();
	CHECK(ep_wait(ep, ev, 4, 50) == 0, "LT: nothing after the read");
	CHECK(now_s() - t >= 0.045, "waited its timeout");
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
	t = now_s();
	n = ep_wait(ep, ev, 4, 2000);
	CHECK(n == 1 && ev[0].data.u64 == 0xa11ce && now_s() - t < 1.9,
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

static struct sockaddr_in6 sin6_of(const __u8 *ip, __u16 port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons(port) };

	if (ip)
		memcpy(&a.sin6_addr, ip, 16);
	return a;
}

static void test_inet6(void)
{
	struct timeval tv = { 2, 0 };
	struct sockaddr_in6 a6 = sin6_of(NULL, 5040),
			    to = sin6_of(local_ip6, 5040), from, other;
	struct sockaddr_in a4 = sin_of(0, 5040);
	int a = vz_socket(AF_INET6, SOCK_DGRAM, 0),
	    b = vz_socket(AF_INET6, SOCK_DGRAM, 0);
	int v4 = bound(5040), v, one = 1, zero = 0;
	socklen_t len = sizeof(from);
	char buf[64];

	CHECK(a >= 0 && b >= 0, "AF_INET6 sockets: %s", strerror(errno));
	vz_setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	vz_setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	other = a6;
	other.sin6_family = AF_INET;
	CHECK(vz_bind(a, SA(other), sizeof(other)) == -1 &&
		      errno == EAFNOSUPPORT,
	      "an AF_INET family: EAFNOSUPPORT (%s)", strerror(errno));
	CHECK(vz_bind(a, (struct sockaddr *)&a4, sizeof(a4)) == -1 &&
		      errno == EINVAL,
	      "a sockaddr_in: too short, EINVAL as Linux (%s)",
	      strerror(errno));
	CHECK(vz_bind(a, SA(a6), 20) == -1 && errno == EINVAL, "short: EINVAL");
	other = sin6_of(local_ip6, 5040);
	other.sin6_addr.s6_addr[15] = 9;
	CHECK(vz_bind(a, SA(other), sizeof(other)) == -1 &&
		      errno == EADDRNOTAVAIL,
	      "another address: EADDRNOTAVAIL (%s)", strerror(errno));
	/* IPv6-only: the AF_INET socket on 5040 is no clash */
	CHECK(!vz_bind(a, SA(a6), sizeof(a6)),
	      "bind [::]:5040 beside 0.0.0.0:5040: %s", strerror(errno));
	CHECK(vz_sendto(b, "six", 3, 0, SA(to), sizeof(to)) == 3, "sendto: %s",
	      strerror(errno));
	CHECK(vz_recvfrom(a, buf, sizeof(buf), 0, SA(from), &len) == 3 &&
		      !memcmp(buf, "six", 3),
	      "recvfrom: %s", strerror(errno));
	CHECK(len == sizeof(from) && from.sin6_family == AF_INET6 &&
		      !memcmp(&from.sin6_addr, local_ip6, 16) &&
		      from.sin6_port != 0,
	      "the sender as sockaddr_in6");
	/* the reply goes back to where it came from; MSG_TRUNC's length is
	 * the datagram's, not counting the address the ring carries */
	CHECK(vz_sendto(a, "back!", 5, 0, SA(from), len) == 5 &&
		      vz_recv(b, buf, 2, MSG_TRUNC) == 5,
	      "the reply, truncated: %s", strerror(errno));
	CHECK(vz_recv(v4, buf, sizeof(buf), MSG_DONTWAIT) == -1 &&
		      errno == EAGAIN,
	      "nothing for the AF_INET socket");
	len = sizeof(from);
	CHECK(!vz_getsockname(a, SA(from), &len) && len == sizeof(from) &&
		      ntohs(from.sin6_port) == 5040,
	      "getsockname");
	CHECK(!vz_connect(b, SA(to), sizeof(to)) &&
		      vz_send(b, "c", 1, 0) == 1 &&
		      vz_recv(a, buf, sizeof(buf), 0) == 1,
	      "connected send: %s", strerror(errno));
	len = sizeof(from);
	CHECK(!vz_getpeername(b, SA(from), &len) &&
		      !memcmp(&from.sin6_addr, local_ip6, 16),
	      "getpeername");
	len = sizeof(v);
	CHECK(!vz_getsockopt(a, SOL_SOCKET, SO_DOMAIN, &v, &len) &&
		      v == AF_INET6,
	      "SO_DOMAIN");
	CHECK(!vz_setsockopt(a, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) &&
		      vz_setsockopt(a, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
				    sizeof(zero)) == -1 &&
		      errno == EOPNOTSUPP,
	      "IPV6_V6ONLY: 1 is what it is, 0 refused");
	vz_close(a);
	vz_close(b);
	vz_close(v4);
}

/* ---- dup ---- */

static void test_dup(void)
{
	struct vz_sock_server_stats s0 = stats();
	int a = bound(5031), b = udp(), d, d2, p[2];
	char c[8];

	CHECK(!pipe(p), "pipe");
	d = vz_dup(a);
	CHECK(d >= 0 && d != a && vz_is_socket(d) && port_of(d) == 5031,
	      "vz_dup: the same socket (%s)", strerror(errno));
	CHECK(!(fcntl(d, F_GETFD) & FD_CLOEXEC), "dup: no CLOEXEC");
	CHECK(send_to(b, "dd", 2, 5031) == 2 && vz_recv(d, c, 8, 0) == 2,
	      "received through the copy");
	d2 = vz_fcntl(a, F_DUPFD_CLOEXEC, 100);
	CHECK(d2 >= 100 && (fcntl(d2, F_GETFD) & FD_CLOEXEC) &&
		      vz_is_socket(d2),
	      "F_DUPFD_CLOEXEC: %d %s", d2, strerror(errno));
	CHECK(!vz_close(a) && !vz_is_socket(a) && vz_is_socket(d),
	      "the first close keeps the socket");
	CHECK(stats().sockets == s0.sockets + 2, "the poller still has it");
	CHECK(send_to(b, "ee", 2, 5031) == 2 && vz_recv(d2, c, 8, 0) == 2,
	      "still receiving after the original closed");
	/* dup2 over a copy closes that copy; the copy of a pipe is a pipe. */
	CHECK(vz_dup2(p[0], d2) == d2 && !vz_is_socket(d2),
	      "dup2 over a veloz copy: %s", strerror(errno));
	CHECK(vz_dup2(d, d) == d, "dup2 onto itself");
	CHECK(vz_dup3(d, d, 0) == -1 && errno == EINVAL, "dup3 onto itself");
	CHECK(vz_dup3(d, p[1], 42) == -1 && errno == EINVAL, "dup3 flags");
	CHECK(vz_dup(1000000) == -1 && errno == EBADF, "dup of nothing");
	/* dup2 a veloz socket over a pipe descriptor: now a socket. */
	CHECK(vz_dup2(d, p[1]) == p[1] && vz_is_socket(p[1]),
	      "dup2 over a kernel descriptor: %s", strerror(errno));
	CHECK(!vz_close(d) && vz_is_socket(p[1]), "one copy left");
	CHECK(!vz_close(p[1]), "last close");
	CHECK(stats().sockets == s0.sockets + 1,
	      "freed at the last close: %llu",
	      (unsigned long long)stats().sockets);
	close(d2);
	close(p[0]);
	vz_close(b);
}

/* ---- processes ---- */

static void child_hold(int ready)
{
	struct sockaddr_in sin = sin_of(0, 5010);
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "A", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

static void child_echo(int ready)
{
	struct sockaddr_in sin = sin_of(0, 5011), from;
	socklen_t len = sizeof(from);
	char buf[64];
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "B", 1) != 1)
		_exit(1);
	while ((n = vz_recvfrom(fd, buf, sizeof(buf), 0, SA(from), &len)) > 0) {
		if (n == 4 && !memcmp(buf, "quit", 4))
			_exit(0);
		if (vz_sendto(fd, buf, (size_t)n, 0, SA(from), len) != n)
			_exit(1);
	}
	_exit(1);
}

static pid_t spawn(void (*fn)(int), int ready)
{
	pid_t pid = fork();

	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan if we fail */
		fn(ready);
	}
	return pid;
}

static void test_processes(void)
{
	struct vz_sock_server_stats s0 = stats();
	struct sockaddr_in sin = sin_of(0, 5010);
	int p[2], fd, st = -1;
	pid_t a, b;
	char buf[8];

	CHECK(!pipe(p), "pipe");
	a = spawn(child_hold, p[1]);
	b = spawn(child_echo, p[1]);
	close(p[1]); /* a child that fails closes the pipe */
	CHECK(read(p[0], buf, 1) == 1 && read(p[0], buf + 1, 1) == 1,
	      "children ready");
	fd = udp();
	CHECK(vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EADDRINUSE,
	      "the child holds 5010");
	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	CHECK(!WAIT_STAT(apps_died, s0.apps_died + 1), "death noticed");
	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "5010 free again: %s",
	      strerror(errno));
	CHECK(send_to(fd, "ping", 4, 5011) == 4 &&
		      vz_recv(fd, buf, sizeof(buf), 0) == 4 &&
		      !memcmp(buf, "ping", 4),
	      "the other child still echoes");
	CHECK(send_to(fd, "quit", 4, 5011) == 4, "quit");
	waitpid(b, &st, 0);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "echo child status %d", st);
	vz_close(fd);
	close(p[0]);
}

/*
 * Datagrams queued just before the socket goes must still be sent: the
 * poller sees the close (or the connection's end) and the transmit ring in
 * the same round, the close first. The server is held still (srv_lock)
 * while the application queues and leaves, so that order is certain.
 */
static void child_send_exit(int ready)
{
	struct sockaddr_in sin = sin_of(0, 0), to = sin_of(LOCAL_IP, 5013);
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	char go;

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "C", 1) != 1 || read(ready, &go, 1) != 1)
		_exit(1);
	/* Only the ring: bound already, no round trip to the poller. */
	if (vz_sendto(fd, "last", 4, 0, SA(to), sizeof(to)) != 4)
		_exit(1);
	_exit(0); /* no close: the connection's EOF frees the socket */
}

static int raw_connect(const char *where);

static void test_send_then_close(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_SOCKET,
				.len = sizeof(m),
				.opt = AF_INET };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf) };
	int a = bound(5013), sp[2], st = -1, fd, efd, memfd = -1;
	struct vz_ring_rec *rec;
	struct vz_ring tx;
	size_t len = 0;
	char buf[8];
	void *shm;
	pid_t pid;

	/* An application that exits right after sendto. */
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sp), "socketpair");
	pid = spawn(child_send_exit, sp[1]);
	CHECK(read(sp[0], buf, 1) == 1, "child ready");
	pthread_mutex_lock(&srv_lock);
	CHECK(write(sp[0], "G", 1) == 1, "go");
	waitpid(pid, &st, 0);
	pthread_mutex_unlock(&srv_lock);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "child status %d", st);
	CHECK(vz_recv(a, buf, sizeof(buf), 0) == 4 && !memcmp(buf, "last", 4),
	      "sent before exit: %s", strerror(errno));
	close(sp[0]);
	close(sp[1]);

	/* A CLOSE request right behind a queued datagram. */
	fd = raw_connect(path);
	efd = eventfd(0, EFD_NONBLOCK);
	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c.h), &efd, sizeof(int));
	CHECK(sendmsg(fd, &mh, 0) == sizeof(m), "SOCKET");
	memset(c.buf, 0, sizeof(c.buf));
	mh.msg_controllen = sizeof(c.buf);
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == sizeof(m) && !m.err,
	      "SOCKET reply");
	if (mh.msg_controllen)
		memcpy(&memfd, CMSG_DATA(&c.h), sizeof(int));
	len = (size_t)VZ_SHM_HDR + m.rcvbuf + m.sndbuf;
	shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	CHECK(memfd >= 0 && shm != MAP_FAILED, "mmap");
	if (memfd >= 0 && shm != MAP_FAILED) {
		vz_ring_init(&tx, &((struct vz_sock_shm *)shm)->tx,
			     (__u8 *)shm + VZ_SHM_HDR + m.rcvbuf, m.sndbuf);
		m = (struct vz_ctl_msg){ .type = VZ_CTL_CLOSE,
					 .len = sizeof(m),
					 .id = m.id };
		pthread_mutex_lock(&srv_lock);
		rec = vz_ring_reserve(&tx, 5);
		CHECK(rec != NULL, "reserve");
		if (rec) {
			*rec = (struct vz_ring_rec){ .len = 5,
						     .addr = LOCAL_IP,
						     .port = htons(5013) };
			memcpy(rec + 1, "close", 5);
			vz_ring_commit(&tx, 5);
		}
		CHECK(send(fd, &m, sizeof(m), 0) == sizeof(m), "CLOSE");
		pthread_mutex_unlock(&srv_lock);
		CHECK(recv(fd, &m, sizeof(m), MSG_WAITALL) == sizeof(m) &&
			      m.type == VZ_CTL_CLOSE && !m.err,
		      "CLOSE reply");
		CHECK(vz_recv(a, buf, sizeof(buf), 0) == 5 &&
			      !memcmp(buf, "close", 5),
		      "sent before CLOSE: %s", strerror(errno));
		munmap(shm, len);
	}
	if (memfd >= 0)
		close(memfd);
	close(efd);
	close(fd);
	vz_close(a);
}

/* ---- hostile applications ---- */

static int raw_connect(const char *where)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	struct vz_ctl_msg m;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CHECK(strlen(where) < sizeof(sa.sun_path), "path length");
	memcpy(sa.sun_path, where, strlen(where));
	CHECK(!connect(fd, SA(sa), sizeof(sa)), "connect");
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK(recv(fd, &m, sizeof(m), MSG_WAITALL) == sizeof(m) &&
		      m.type == VZ_CTL_WELCOME && !m.err,
	      "welcome");
	return fd;
}

/* Send, then expect to be dropped (EOF) and the drop to be counted. */
static void expect_dropped(const void *msg, size_t len, const char *what)
{
	__u64 bad = stats().bad_requests;
	int fd = raw_connect(path);
	char buf[64];

	CHECK(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len, "send");
	CHECK(recv(fd, buf, sizeof(buf), 0) == 0, "%s: dropped", what);
	CHECK(!WAIT_STAT(bad_requests, bad + 1), "%s: counted", what);
	close(fd);
}

/* An application that scribbles over its transmit ring's index. */
static void test_corrupt_ring(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_SOCKET,
				.len = sizeof(m),
				.opt = AF_INET };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf) };
	__u64 bad = stats().bad_requests;
	int fd = raw_connect(path), efd = eventfd(0, EFD_NONBLOCK), memfd;
	struct vz_sock_shm *shm;
	char buf[64];

	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c.h), &efd, sizeof(int));
	CHECK(sendmsg(fd, &mh, 0) == sizeof(m), "SOCKET");
	memset(c.buf, 0, sizeof(c.buf));
	mh.msg_controllen = sizeof(c.buf);
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == sizeof(m) && !m.err,
	      "SOCKET reply");
	memcpy(&memfd, CMSG_DATA(&c.h), sizeof(int));
	CHECK(ftruncate(memfd, 4096) < 0, "sealed against shrinking");
	shm = mmap(NULL, VZ_SHM_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		   0);
	CHECK(shm != MAP_FAILED, "mmap");
	__atomic_store_n(&shm->tx.head, 3u, __ATOMIC_RELEASE);
	CHECK(recv(fd, buf, sizeof(buf), 0) == 0, "dropped");
	CHECK(!WAIT_STAT(bad_requests, bad + 1), "counted");
	munmap(shm, VZ_SHM_HDR);
	close(memfd);
	close(efd);
	close(fd);
}

static void test_garbage(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_BIND, .len = sizeof(m) };
	char junk[sizeof(m)];
	int a, b;
	char buf[4];

	memset(junk, 0xff, sizeof(junk));
	expect_dropped(junk, sizeof(junk), "garbage");
	m.id = 999;
	expect_dropped(&m, sizeof(m), "unknown socket id");
	m.type = VZ_CTL_SOCKET;
	m.id = 0;
	m.opt = AF_INET;
	expect_dropped(&m, sizeof(m), "SOCKET without an eventfd");
	test_corrupt_ring();

	a = bound(5012);
	b = udp();
	CHECK(send_to(b, "ok", 2, 5012) == 2 && vz_recv(a, buf, 4, 0) == 2,
	      "the server lives on");
	vz_close(a);
	vz_close(b);
}

/* ---- the listening socket ---- */

static void test_listen(void)
{
	struct vz_sock_server_config cfg = { .path = path,
					     .gid = (gid_t)-1,
					     .local_ip4 = LOCAL_IP };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vz_sock_server *other;
	char err[256] = "", stale[128];
	int fd;

	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(!other && errno == EADDRINUSE && *err, "a second poller: %s (%s)",
	      strerror(errno), err);
	snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
	memcpy(sa.sun_path, stale, strlen(stale));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(!bind(fd, SA(sa), sizeof(sa)), "bind");
	close(fd); /* the file stays, as when a poller dies */
	cfg.path = stale;
	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(other != NULL, "stale file replaced: %s", err);
	vz_sock_server_free(other);
	CHECK(access(stale, F_OK) < 0, "removed at exit");
	fd = open(stale, O_CREAT | O_WRONLY, 0600);
	close(fd);
	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(!other && errno == EADDRINUSE, "a regular file is kept");
	unlink(stale);
}

static void test_limits(void)
{
	int fds[MAX_SOCKETS + 1], n = 0, i;

	while (n <= MAX_SOCKETS) {
		fds[n] = vz_socket(AF_INET, SOCK_DGRAM, 0);
		if (fds[n] < 0)
			break;
		n++;
	}
	CHECK(n == MAX_SOCKETS && errno == ENOBUFS, "ENOBUFS after %d: %s", n,
	      strerror(errno));
	CHECK(stats().sockets == MAX_SOCKETS, "at the limit");
	for (i = 0; i < n; i++)
		vz_close(fds[i]);
	CHECK(!WAIT_STAT(sockets, 0) || stats().sockets == 0, "all freed");
	CHECK(stats().sockets == 0, "%llu left",
	      (unsigned long long)stats().sockets);
}

/* ---- credentials (root only: children become nobody) ---- */

static int child_creds(const char *where, gid_t extra, int want_errno)
{
	gid_t g = extra;
	struct sockaddr_in sin = sin_of(0, 80);
	int fd;

	if (setgroups(extra ? 1 : 0, &g) || setgid(65534) || setuid(65534))
		return 2;
	if (want_errno)
		return vz_sock_init(where) < 0 && errno == want_errno ? 0 : 3;
	if (vz_sock_init(where))
		return 4;
	fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return 5;
	/* Below 1024 needs root, as in the kernel. */
	return vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EACCES ? 0 : 6;
}

static void test_creds(void)
{
	struct vz_sock_server_config cfg = { .gid = 4242,
					     .local_ip4 = LOCAL_IP };
	struct vz_sock_server *s3;
	char p3[160], err[256];
	pid_t pid[2];
	int i;

	if (geteuid() != 0) {
		fprintf(stderr, "test_creds: skipped (not root)\n");
		return;
	}
	snprintf(p3, sizeof(p3), "%s/c/udpd.sock", dir);
	cfg.path = p3;
	s3 = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(s3 != NULL, "server: %s", err);
	if (!s3)
		return;
	/* Let nobody reach the socket: the credentials must refuse it. */
	chmod(dir, 0755);
	snprintf(err, sizeof(err), "%s/c", dir);
	chmod(err, 0755);
	chmod(p3, 0666);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (!pid[i]) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(child_creds(p3, i ? 4242 : 0, i ? 0 : EACCES));
		}
	}
	for (i = 0; i < 2; i++) {
		double end = now_s() + 5;
		int st = -1;

		while (!waitpid(pid[i], &st, WNOHANG) && now_s() < end) {
			vz_sock_server_poll(s3, loop_send, NULL, 16);
			usleep(500);
		}
		CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "creds child %d: %d",
		      i, WEXITSTATUS(st));
	}
	CHECK(vz_sock_server_get_stats(s3)->apps_refused == 1 &&
		      vz_sock_server_get_stats(s3)->apps_total == 1,
	      "one refused, one accepted");
	vz_sock_server_free(s3);
}

/* ---- a hung poller (stopped or stuck): every wait is bounded ---- */

static struct vz_sock_server *hung_srv;
static pthread_mutex_t hung_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int hung_paused, hung_stop;

static int no_send(void *opaque, const struct vz_dgram_meta *m,
		   const void *payload, size_t len)
{
	(void)opaque, (void)m, (void)payload, (void)len;
	return -ENETUNREACH;
}

/* The child's poller; while hung_paused it does nothing, as if stopped. */
static void *hung_main(void *arg)
{
	(void)arg;
	while (!hung_stop) {
		unsigned int n = 0;

		pthread_mutex_lock(&hung_lock);
		if (!hung_paused)
			n = vz_sock_server_poll(hung_srv, no_send, NULL, 64);
		pthread_mutex_unlock(&hung_lock);
		if (!n)
			usleep(200);
	}
	return NULL;
}

static __u64 hung_sockets(void)
{
	__u64 n;

	pthread_mutex_lock(&hung_lock);
	n = vz_sock_server_get_stats(hung_srv)->sockets;
	pthread_mutex_unlock(&hung_lock);
	return n;
}

/* In a child (the parent's link is to the main poller): 0, or the step
 * that failed. */
static int child_hung(const char *silent, const char *where)
{
	struct vz_sock_server_config cfg = { .path = where,
					     .gid = (gid_t)-1,
					     .local_ip4 = LOCAL_IP };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sockaddr_in sin = sin_of(0, 0);
	char err[256];
	pthread_t th;
	double t0, took, end;
	int lfd, fd1, fd2, fd3;

	setenv("VZ_UDPD_TIMEOUT_MS", "300", 1);
	/* A poller that never accepts: connect() succeeds on its backlog and
	 * the welcome never comes. */
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (strlen(silent) >= sizeof(sa.sun_path))
		return 2;
	memcpy(sa.sun_path, silent, strlen(silent) + 1);
	if (lfd < 0 || bind(lfd, SA(sa), sizeof(sa)) || listen(lfd, 4))
		return 2;
	t0 = now_s();
	if (!vz_sock_init(silent) || errno != ETIMEDOUT)
		return 3;
	took = now_s() - t0;
	if (took < 0.25 || took > 3)
		return 4;
	close(lfd);
	unlink(silent);

	hung_srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!hung_srv)
		return 5;
	pthread_create(&th, NULL, hung_main, NULL);
	if (vz_sock_init(where))
		return 6;
	fd1 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd1 < 0)
		return 7;
	/* Stopped: the request times out and the link is dropped. */
	pthread_mutex_lock(&hung_lock); /* not in the middle of a poll */
	hung_paused = 1;
	pthread_mutex_unlock(&hung_lock);
	t0 = now_s();
	fd2 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd2 >= 0 || errno != ETIMEDOUT) {
		fprintf(stderr, "hung poller: socket() gave %d (%s)\n", fd2,
			strerror(errno));
		return 8;
	}
	if (now_s() - t0 > 3)
		return 9;
	/* fd1 lived on that link: said at once, and close still closes. */
	if (!vz_bind(fd1, SA(sin), sizeof(sin)) || errno != ECONNRESET)
		return 10;
	if (vz_close(fd1) || vz_is_socket(fd1))
		return 11;
	/* Running again: the next socket reconnects and works, and the
	 * poller has freed what the dropped link held. */
	hung_paused = 0;
	fd3 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd3 < 0 || vz_bind(fd3, SA(sin), sizeof(sin)))
		return 12;
	end = now_s() + 2;
	while (hung_sockets() != 1 && now_s() < end)
		usleep(1000);
	if (hung_sockets() != 1)
		return 13;
	vz_close(fd3);
	vz_sock_exit();
	hung_stop = 1;
	pthread_join(th, NULL);
	vz_sock_server_free(hung_srv);
	return 0;
}

static void test_hung_poller(void)
{
	char silent[160], where[160];
	double end = now_s() + 20;
	int st = -1;
	pid_t pid;

	snprintf(silent, sizeof(silent), "%s/silent.sock", dir);
	snprintf(where, sizeof(where), "%s/h/udpd.sock", dir);
	pid = fork();
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(child_hung(silent, where));
	}
	while (!waitpid(pid, &st, WNOHANG) && now_s() < end)
		usleep(10000);
	if (now_s() >= end) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "hung poller: step %d",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	unlink(silent);
	snprintf(silent, sizeof(silent), "%s/h", dir);
	rmdir(silent);
}

int main(void)
{
	struct vz_sock_server_config cfg = { .gid = getgid(),
					     .local_ip4 = LOCAL_IP,
					     .local_ip6 = { 0xfd, [15] = 1 },
					     .max_sockets = MAX_SOCKETS };
	struct stat st;
	pthread_t th;
	char err[256];

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/vz-sock-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/run/udpd.sock", dir);
	cfg.path = path;
	srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "server: %s\n", err);
		return 1;
	}
	snprintf(err, sizeof(err), "%s/run", dir);
	CHECK(!stat(err, &st) && (st.st_mode & 0777) == 0750, "dir 0750");
	CHECK(!stat(path, &st) && (st.st_mode & 0777) == 0660, "socket 0660");
	pthread_create(&th, NULL, srv_main, NULL);
	CHECK(!vz_sock_init(path), "vz_sock_init: %s", strerror(errno));

	test_errors();
	test_roundtrip();
	test_reuse();
	test_connect();
	test_nonblock_timeout();
	test_trunc_peek();
	test_ring_full();
	test_so_error();
	test_poll_select();
	test_epoll();
	test_dup();
	test_inet6();
	test_processes();
	test_send_then_close();
	test_garbage();
	test_listen();
	test_limits();
	test_creds();
	test_hung_poller();

	vz_sock_exit();
	srv_stop = 1;
	pthread_join(th, NULL);
	vz_sock_server_free(srv);
	CHECK(access(path, F_OK) < 0, "socket file removed");
	snprintf(err, sizeof(err), "%s/run", dir);
	rmdir(err);
	snprintf(err, sizeof(err), "%s/c", dir);
	rmdir(err);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
