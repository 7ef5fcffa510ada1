// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload, from inside a program it is preloaded into (meson runs
 * this with LD_PRELOAD set). Modes:
 *
 *   routed    forks a loopback poller (the real server of libveloz-sock, its
 *             transmit rings fed back to its receive rings) and checks that
 *             every shadowed call on UDP sockets goes through veloz
 *   fallback  no poller: UDP sockets are the kernel's, one warning line
 *   strict    no poller, VZ_PRELOAD_STRICT=1: UDP sockets fail cleanly
 *   poller P  only the loopback poller, on socket P, until SIGTERM (for the
 *             Python tests of the apps and of unmodified programs)
 *
 * In every mode AF_UNIX and TCP sockets must be untouched.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sock/poller/server.h"
#include "veloz/sock.h"

#define LP_QUEUE 64

/* ----- the loopback poller ----- */

struct lp_dgram {
	struct vz_dgram_meta m;
	size_t len;
	char data[VZ_STACK_MAX_UDP];
};

struct lp {
	__be32 ip;
	unsigned int n;
	struct lp_dgram q[LP_QUEUE];
};

static volatile sig_atomic_t lp_stop;

static void lp_on_signal(int sig)
{
	(void)sig;
	lp_stop = 1;
}

/* Queued, then delivered after the poll round: only to our own address. */
static int lp_send(void *opaque, const struct vz_dgram_meta *m,
		   const void *payload, size_t len)
{
	struct lp *lp = opaque;
	struct lp_dgram *d;

	if (m->dst_ip != lp->ip)
		return -ENETUNREACH;
	if (lp->n == LP_QUEUE)
		return -ENOBUFS;
	d = &lp->q[lp->n++];
	d->m = *m;
	d->len = len;
	memcpy(d->data, payload, len);
	return 0;
}

static int lp_run(const char *path)
{
	struct vz_sock_server_config cfg = { .path = path, .gid = getgid() };
	struct lp *lp = calloc(1, sizeof(*lp));
	struct timespec idle = { .tv_nsec = 20000 };
	struct vz_sock_server *srv;
	char err[256];

	signal(SIGTERM, lp_on_signal);
	signal(SIGINT, lp_on_signal);
	if (!lp)
		return 1;
	lp->ip = cfg.local_ip4 = htonl(INADDR_LOOPBACK);
	srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "loopback poller: %s\n", err);
		return 1;
	}
	while (!lp_stop && getppid() != 1) {
		unsigned int work = vz_sock_server_poll(srv, lp_send, lp, 64);

		for (unsigned int i = 0; i < lp->n; i++)
			vz_sock_server_deliver(srv, &lp->q[i].m, lp->q[i].data,
					       lp->q[i].len);
		if (!work && !lp->n)
			nanosleep(&idle, NULL);
		lp->n = 0;
	}
	vz_sock_server_free(srv);
	free(lp);
	return 0;
}

/* ----- helpers ----- */

static struct sockaddr_in lo_addr(unsigned short port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return a;
}

static int udp_bound(struct sockaddr_in *out)
{
	struct sockaddr_in a = lo_addr(0);
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	CHECK(fd >= 0, "socket: %s", strerror(errno));
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s",
	      strerror(errno));
	CHECK(getsockname(fd, (struct sockaddr *)out, &len) == 0 &&
		      out->sin_port != 0,
	      "getsockname: %s", strerror(errno));
	return fd;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* AF_UNIX and TCP over loopback, which the shim must leave to libc. */
static void check_untouched(void)
{
	struct sockaddr_in a = lo_addr(0);
	socklen_t len = sizeof(a);
	int sp[2], l, c, s;
	char buf[8];

	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) == 0, "socketpair: %s",
	      strerror(errno));
	CHECK(!vz_is_socket(sp[0]), "an AF_UNIX socket became veloz's");
	CHECK(send(sp[0], "unix", 4, 0) == 4 && recv(sp[1], buf, 8, 0) == 4 &&
		      !memcmp(buf, "unix", 4),
	      "AF_UNIX datagram lost");
	close(sp[0]);
	close(sp[1]);

	l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0 && !vz_is_socket(l), "TCP socket: %s", strerror(errno));
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		      listen(l, 1) == 0 &&
		      getsockname(l, (struct sockaddr *)&a, &len) == 0,
	      "TCP listen: %s", strerror(errno));
	c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0,
	      "TCP connect: %s", strerror(errno));
	s = accept(l, NULL, NULL);
	CHECK(write(c, "tcp", 3) == 3 && read(s, buf, 8) == 3 &&
		      !memcmp(buf, "tcp", 3),
	      "TCP bytes lost");
	close(s);
	close(c);
	close(l);

	/* The loopback poller has no IPv6 address: IPv6 stays the kernel's
	 * (and fails with the rest under VZ_PRELOAD_STRICT=1 without one). */
	errno = 0;
	s = socket(AF_INET6, SOCK_DGRAM, 0);
	if (getenv("VZ_PRELOAD_STRICT"))
		CHECK(s == -1 && errno == ENOENT, "strict: IPv6 UDP fails too");
	else
		CHECK(s >= 0 && !vz_is_socket(s),
		      "UDP over IPv6 is the kernel's: %s", strerror(errno));
	if (s >= 0)
		close(s);
}

/* Redirect stderr into a pipe around fn: the lines it printed. */
static int stderr_lines(void (*fn)(void), char *out, size_t outlen)
{
	int p[2], saved = dup(STDERR_FILENO), lines = 0;
	ssize_t n;

	if (pipe(p) < 0 || saved < 0)
		return -1;
	dup2(p[1], STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	n = read(p[0], out, outlen - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
	for (char *c = out; *c; c++)
		lines += *c == '\n';
	return lines;
}

/* ----- no poller ----- */

static void fallback_work(void)
{
	struct sockaddr_in a_addr, from;
	socklen_t flen = sizeof(from);
	int a = udp_bound(&a_addr);
	int b = socket(AF_INET, SOCK_DGRAM, 0);
	char buf[16];

	CHECK(a >= 0 && b >= 0 && !vz_is_socket(a) && !vz_is_socket(b),
	      "fallback sockets must be the kernel's");
	CHECK(sendto(b, "ping", 4, 0, (struct sockaddr *)&a_addr,
		     sizeof(a_addr)) == 4,
	      "sendto: %s", strerror(errno));
	CHECK(readable(a, 2000), "nothing arrived over kernel loopback");
	CHECK(recvfrom(a, buf, sizeof(buf), 0, (struct sockaddr *)&from,
		       &flen) == 4 &&
		      !memcmp(buf, "ping", 4),
	      "recvfrom: %s", strerror(errno));
	close(a);
	close(b);
}

static void strict_work(void)
{
	int fd;

	errno = 0;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(fd == -1 && errno == ENOENT,
	      "strict: socket gave %d (%s), not ENOENT", fd, strerror(errno));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	CHECK(fd == -1 && errno == ENOENT, "strict: second socket gave %d", fd);
}

static void no_poller(void (*work)(void), const char *what)
{
	char err[1024];
	int lines = stderr_lines(work, err, sizeof(err));

	CHECK(lines == 1, "%s: %d warning lines, want 1: %s", what, lines, err);
	CHECK(strstr(err, "veloz-preload: no poller at") != NULL,
	      "%s: warning: %s", what, err);
	/* once per process: a second round prints nothing */
	lines = stderr_lines(work, err, sizeof(err));
	CHECK(lines == 0, "%s: warned again: %s", what, err);
	check_untouched();
}

/* ----- routed through the loopback poller ----- */

static void check_basic(int a, const struct sockaddr_in *a_addr, int b,
			const struct sockaddr_in *b_addr)
{
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	char buf[64];

	CHECK(vz_is_socket(a) && vz_is_socket(b), "UDP sockets not veloz's");
	CHECK(sendto(b, "hello", 5, 0, (const struct sockaddr *)a_addr,
		     sizeof(*a_addr)) == 5,
	      "sendto: %s", strerror(errno));
	CHECK(readable(a, 2000), "poll: nothing arrived");
	CHECK(recvfrom(a, buf, sizeof(buf), 0, (struct sockaddr *)&from,
		       &flen) == 5 &&
		      !memcmp(buf, "hello", 5),
	      "recvfrom: %s", strerror(errno));
	CHECK(from.sin_port == b_addr->sin_port &&
		      from.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "recvfrom: wrong sender %u", ntohs(from.sin_port));
}

static void check_iovecs(int a, const struct sockaddr_in *a_addr, int b)
{
	struct iovec out[3] = { { "abc", 3 }, { "defg", 4 }, { "hi", 2 } };
	char p1[4], p2[2], p3[16];
	struct iovec in[3] = { { p1, 4 }, { p2, 2 }, { p3, 16 } };
	struct sockaddr_in from;
	struct msghdr m = { .msg_name = (void *)a_addr,
			    .msg_namelen = sizeof(*a_addr),
			    .msg_iov = out,
			    .msg_iovlen = 3 };
	ssize_t n;

	CHECK(sendmsg(b, &m, 0) == 9, "sendmsg: %s", strerror(errno));
	CHECK(readable(a, 2000), "sendmsg: nothing arrived");
	m = (struct msghdr){ .msg_name = &from,
			     .msg_namelen = sizeof(from),
			     .msg_iov = in,
			     .msg_iovlen = 3 };
	n = recvmsg(a, &m, 0);
	CHECK(n == 9 && !memcmp(p1, "abcd", 4) && !memcmp(p2, "ef", 2) &&
		      !memcmp(p3, "ghi", 3) && m.msg_flags == 0 &&
		      m.msg_namelen == sizeof(from),
	      "recvmsg scatter: %zd %s", n, strerror(errno));

	/* truncated into two short iovecs: MSG_TRUNC, and the real length
	 * when asked */
	CHECK(sendmsg(b,
		      &(struct msghdr){ .msg_name = (void *)a_addr,
					.msg_namelen = sizeof(*a_addr),
					.msg_iov = out,
					.msg_iovlen = 3 },
		      0) == 9,
	      "sendmsg 2");
	CHECK(readable(a, 2000), "sendmsg 2: nothing arrived");
	m = (struct msghdr){ .msg_iov = in, .msg_iovlen = 2 };
	n = recvmsg(a, &m, MSG_TRUNC);
	CHECK(n == 9 && (m.msg_flags & MSG_TRUNC) && !memcmp(p2, "ef", 2),
	      "recvmsg truncated: %zd flags %x", n, m.msg_flags);
}

static void check_connected(int a, const struct sockaddr_in *a_addr, int b,
			    const struct sockaddr_in *b_addr)
{
	struct iovec out[2] = { { "wri", 3 }, { "tev", 3 } };
	char x[4], y[8], buf[16];
	struct iovec in[2] = { { x, 4 }, { y, 8 } };
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);

	CHECK(connect(b, (const struct sockaddr *)a_addr, sizeof(*a_addr)) == 0,
	      "connect: %s", strerror(errno));
	CHECK(getpeername(b, (struct sockaddr *)&peer, &plen) == 0 &&
		      peer.sin_port == a_addr->sin_port,
	      "getpeername: %s", strerror(errno));
	CHECK(write(b, "write", 5) == 5, "write: %s", strerror(errno));
	CHECK(readable(a, 2000) && read(a, buf, sizeof(buf)) == 5 &&
		      !memcmp(buf, "write", 5),
	      "read: %s", strerror(errno));
	CHECK(writev(b, out, 2) == 6, "writev: %s", strerror(errno));
	CHECK(readable(a, 2000) && readv(a, in, 2) == 6 &&
		      !memcmp(x, "writ", 4) && !memcmp(y, "ev", 2),
	      "readv: %s", strerror(errno));
	CHECK(send(b, "send", 4, 0) == 4, "send: %s", strerror(errno));
	CHECK(readable(a, 2000) && recv(a, buf, sizeof(buf), 0) == 4,
	      "recv: %s", strerror(errno));
	(void)b_addr;
}

static void check_mmsg(int a, const struct sockaddr_in *a_addr, int b)
{
	struct iovec o[2] = { { "one", 3 }, { "three", 5 } };
	struct mmsghdr out[2] = {
		{ .msg_hdr = { .msg_name = (void *)a_addr,
			       .msg_namelen = sizeof(*a_addr),
			       .msg_iov = &o[0],
			       .msg_iovlen = 1 } },
		{ .msg_hdr = { .msg_name = (void *)a_addr,
			       .msg_namelen = sizeof(*a_addr),
			       .msg_iov = &o[1],
			       .msg_iovlen = 1 } },
	};
	char b1[8], b2[8];
	struct iovec i[2] = { { b1, 8 }, { b2, 8 } };
	struct mmsghdr in[2] = {
		{ .msg_hdr = { .msg_iov = &i[0], .msg_iovlen = 1 } },
		{ .msg_hdr = { .msg_iov = &i[1], .msg_iovlen = 1 } },
	};
	int n = 0, got;

	CHECK(sendmmsg(b, out, 2, 0) == 2, "sendmmsg: %s", strerror(errno));
	for (int t = 0; t < 200 && n < 2; t++) {
		if (!readable(a, 20))
			continue;
		got = recvmmsg(a, in + n, 2 - n, 0, NULL);
		CHECK(got > 0, "recvmmsg: %s", strerror(errno));
		if (got <= 0)
			break;
		n += got;
	}
	CHECK(n == 2 && in[0].msg_len == 3 && in[1].msg_len == 5 &&
		      !memcmp(b1, "one", 3) && !memcmp(b2, "three", 5),
	      "recvmmsg: %d datagrams", n);
	/* Hostile vectors get the kernel's errnos on either stack. */
	errno = 0;
	CHECK(sendmmsg(b, NULL, 2, 0) < 0 && errno == EFAULT,
	      "sendmmsg NULL vector: %s", strerror(errno));
	CHECK(sendmmsg(b, out, 0, 0) == 0, "sendmmsg vlen 0");
	out[0].msg_hdr.msg_iovlen = 5000;
	errno = 0;
	CHECK(sendmmsg(b, out, 1, 0) < 0 && errno == EMSGSIZE,
	      "sendmmsg iovlen 5000: %s", strerror(errno));
	out[0].msg_hdr.msg_iovlen = 1;
	errno = 0;
	CHECK(recvmmsg(a, NULL, 2, MSG_DONTWAIT, NULL) < 0 && errno == EFAULT,
	      "recvmmsg NULL vector: %s", strerror(errno));
}

static void check_flags(int a, const struct sockaddr_in *a_addr, int b)
{
	int on = 1, off = 0, avail = -1, rcvbuf = 0, type = 0;
	socklen_t len = sizeof(int);
	struct timeval tv = { .tv_sec = 2 };
	char buf[16];

	CHECK(fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK) == 0 &&
		      (fcntl(a, F_GETFL) & O_NONBLOCK),
	      "fcntl O_NONBLOCK: %s", strerror(errno));
	CHECK(recv(a, buf, sizeof(buf), 0) == -1 && errno == EAGAIN,
	      "non-blocking recv on an empty socket: %s", strerror(errno));
	CHECK(ioctl(a, FIONBIO, &off) == 0 && !(fcntl(a, F_GETFL) & O_NONBLOCK),
	      "FIONBIO off: %s", strerror(errno));
	CHECK(ioctl(a, FIONBIO, &on) == 0 && (fcntl(a, F_GETFL) & O_NONBLOCK),
	      "FIONBIO on: %s", strerror(errno));
	CHECK(ioctl(a, FIONREAD, &avail) == 0 && avail == 0,
	      "FIONREAD empty: %d %s", avail, strerror(errno));
	CHECK(sendto(b, "seven!!", 7, 0, (const struct sockaddr *)a_addr,
		     sizeof(*a_addr)) == 7,
	      "sendto");
	CHECK(readable(a, 2000) && ioctl(a, FIONREAD, &avail) == 0 &&
		      avail == 7,
	      "FIONREAD: %d", avail);
	CHECK(recv(a, buf, sizeof(buf), 0) == 7, "recv after FIONREAD");
	CHECK(fcntl(a, F_SETFD, FD_CLOEXEC) == 0 &&
		      fcntl(a, F_GETFD) == FD_CLOEXEC,
	      "FD_CLOEXEC: %s", strerror(errno));
	CHECK(setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0,
	      "SO_RCVTIMEO: %s", strerror(errno));
	CHECK(getsockopt(a, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
		      type == SOCK_DGRAM,
	      "SO_TYPE: %d %s", type, strerror(errno));
	len = sizeof(int);
	CHECK(getsockopt(a, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) == 0 &&
		      rcvbuf > 0,
	      "SO_RCVBUF: %s", strerror(errno));
}

/* A kernel descriptor (the pipe p) and a veloz one (a) in the same poll,
 * select, ppoll and pselect. */
static void check_mixed_polls(int a, const struct sockaddr_in *a_addr, int b,
			      const int p[2])
{
	struct timespec ts = { .tv_nsec = 50000000 };
	struct timeval tv = { .tv_sec = 2 };
	struct pollfd pf[2];
	fd_set rd;
	char buf[8];

	CHECK(write(p[1], "x", 1) == 1, "pipe write");
	pf[0] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = a, .events = POLLIN };
	CHECK(poll(pf, 2, 2000) == 1 && pf[0].revents == POLLIN &&
		      pf[1].revents == 0,
	      "mixed poll: %x %x", pf[0].revents, pf[1].revents);
	FD_ZERO(&rd);
	FD_SET(a, &rd);
	FD_SET(p[0], &rd);
	CHECK(select((a > p[0] ? a : p[0]) + 1, &rd, NULL, NULL, &tv) == 1 &&
		      FD_ISSET(p[0], &rd) && !FD_ISSET(a, &rd),
	      "mixed select: %s", strerror(errno));
	pf[1].events = POLLIN | POLLOUT;
	CHECK(ppoll(pf + 1, 1, &ts, NULL) == 1 && pf[1].revents == POLLOUT,
	      "ppoll: %x", pf[1].revents);
	pf[1].events = POLLIN;
	CHECK(ppoll(pf + 1, 1, &ts, NULL) == 0, "ppoll: no timeout");
	CHECK(sendto(b, "sel", 3, 0, (const struct sockaddr *)a_addr,
		     sizeof(*a_addr)) == 3,
	      "sendto");
	FD_ZERO(&rd);
	FD_SET(a, &rd);
	ts.tv_sec = 2;
	CHECK(pselect(a + 1, &rd, NULL, NULL, &ts, NULL) == 1 &&
		      FD_ISSET(a, &rd),
	      "pselect: %s", strerror(errno));
	CHECK(recv(a, buf, sizeof(buf), 0) == 3, "recv after select");
	CHECK(read(p[0], buf, 1) == 1, "pipe read");
}

/* epoll over the pipe and the veloz socket, through libc's names */
static void check_mixed_epoll(int ep, int a, const struct sockaddr_in *a_addr,
			      int b, const int p[2])
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[4];
	char buf[8];

	ev.data.u64 = 1;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0, "epoll ADD veloz: %s",
	      strerror(errno));
	ev.data.u64 = 2;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0,
	      "epoll on a pipe: %s", strerror(errno));
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == -1 && errno == EEXIST,
	      "epoll ADD twice: %s", strerror(errno));
	CHECK(epoll_wait(ep, evs, 4, 0) == 0, "epoll: nothing ready");
	CHECK(sendto(b, "ep", 2, 0, (const struct sockaddr *)a_addr,
		     sizeof(*a_addr)) == 2,
	      "sendto");
	CHECK(epoll_wait(ep, evs, 4, 2000) == 1 && evs[0].data.u64 == 1 &&
		      evs[0].events == EPOLLIN,
	      "epoll_wait: the veloz socket");
	CHECK(write(p[1], "y", 1) == 1, "pipe write");
	CHECK(epoll_pwait(ep, evs, 4, 2000, NULL) == 2, "epoll_pwait: both");
	CHECK(recv(a, buf, sizeof(buf), 0) == 2 && read(p[0], buf, 1) == 1,
	      "drain");
}

/* a copy is the same socket; closing one keeps the other */
static void check_dups(int a, const struct sockaddr_in *a_addr, int b,
		       const int p[2])
{
	char buf[8];
	int d, d2;

	d = dup(a);
	CHECK(d >= 0 && vz_is_socket(d), "dup: %s", strerror(errno));
	CHECK(sendto(b, "du", 2, 0, (const struct sockaddr *)a_addr,
		     sizeof(*a_addr)) == 2 &&
		      readable(d, 2000) && recv(d, buf, sizeof(buf), 0) == 2,
	      "recv through the copy: %s", strerror(errno));
	d2 = fcntl(a, F_DUPFD_CLOEXEC, 0);
	CHECK(d2 >= 0 && vz_is_socket(d2), "F_DUPFD_CLOEXEC: %s",
	      strerror(errno));
	CHECK(dup2(p[0], d2) == d2 && !vz_is_socket(d2) && vz_is_socket(a),
	      "dup2 over a copy replaces only the copy: %s", strerror(errno));
	CHECK(close(d) == 0 && close(d2) == 0 && vz_is_socket(a),
	      "close the copies");
}

static void check_waits(int a, const struct sockaddr_in *a_addr, int b)
{
	int p[2], ep = epoll_create1(0);

	CHECK(pipe(p) == 0, "pipe");
	check_mixed_polls(a, a_addr, b, p);
	check_mixed_epoll(ep, a, a_addr, b, p);
	check_dups(a, a_addr, b, p);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL) == 0, "epoll DEL: %s",
	      strerror(errno));
	close(ep);
	close(p[0]);
	close(p[1]);
}

static void routed_work(void)
{
	struct sockaddr_in a_addr, b_addr;
	int a = udp_bound(&a_addr), b = udp_bound(&b_addr);

	check_basic(a, &a_addr, b, &b_addr);
	check_iovecs(a, &a_addr, b);
	check_mmsg(a, &a_addr, b);
	check_flags(a, &a_addr, b);
	check_waits(a, &a_addr, b);
	check_connected(a, &a_addr, b, &b_addr);
	CHECK(close(a) == 0 && !vz_is_socket(a), "close: %s", strerror(errno));
	CHECK(close(b) == 0, "close b");
	check_untouched();
}

static int routed(void)
{
	char dir[] = "/tmp/vz-preload-XXXXXX", path[64], err[1024];
	struct stat st;
	pid_t pid;
	int status, lines;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/udpd.sock", dir);
	pid = fork();
	if (pid == 0)
		_exit(lp_run(path));
	for (int i = 0; i < 200 && stat(path, &st); i++)
		usleep(10000);
	setenv("VZ_UDPD_SOCKET", path, 1);
	lines = stderr_lines(routed_work, err, sizeof(err));
	CHECK(lines == 0, "stderr: %s", err);
	kill(pid, SIGTERM);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0,
	      "loopback poller failed");
	rmdir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "poller") && argc == 3)
		return lp_run(argv[2]);
	if (!dlsym(RTLD_DEFAULT, "vz_pl_veloz")) {
		fprintf(stderr, "run with LD_PRELOAD=libveloz-preload.so\n");
		return 1;
	}
	if (!strcmp(mode, "routed"))
		routed();
	else if (!strcmp(mode, "fallback"))
		no_poller(fallback_work, "fallback");
	else if (!strcmp(mode, "strict"))
		no_poller(strict_work, "strict");
	else {
		fprintf(stderr,
			"usage: %s routed|fallback|strict|poller PATH\n",
			argv[0]);
		return 2;
	}
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
