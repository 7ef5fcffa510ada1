// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock's calls against the poller's socket table (sock_harness.h):
 * errors, a roundtrip, SO_REUSEPORT, connect, non-blocking and timeouts,
 * MSG_TRUNC and MSG_PEEK, a full ring, SO_ERROR, poll and select, dup, IPv6.
 */
#include "sock_harness.h"

/* IP_MTU_DISCOVER: DONT and OMIT are what the stack does (it never sets
 * DF); modes that need DF are refused, nonsense is EINVAL */
static void check_mtu_discover(int fd)
{
	socklen_t len;
	int v;

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
	check_mtu_discover(fd);
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
	end = vz_now_s() + 2;
	while (*na + *nb < 32 && vz_now_s() < end) {
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
	t = vz_now_s();
	CHECK(vz_recv(a, buf, 8, 0) < 0 && errno == EAGAIN, "EAGAIN");
	CHECK(vz_now_s() - t < 0.05, "at once");
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
	t = vz_now_s();
	CHECK(vz_recv(a, buf, 8, 0) < 0 && errno == EAGAIN, "timed out");
	t = vz_now_s() - t;
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
	t = vz_now_s();
	CHECK(vz_poll(fds, 2, 50) == 0, "nothing ready");
	CHECK(vz_now_s() - t >= 0.045, "waited");
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

int main(void)
{
	if (sock_harness_start())
		return 1;
	test_errors();
	test_roundtrip();
	test_reuse();
	test_connect();
	test_nonblock_timeout();
	test_trunc_peek();
	test_ring_full();
	test_so_error();
	test_poll_select();
	test_dup();
	test_inet6();
	return sock_harness_stop();
}
