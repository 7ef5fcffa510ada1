// SPDX-License-Identifier: BSD-2-Clause
/*
 * The poller's socket table: applications (one UNIX stream connection
 * each), their sockets, the ports they hold and the rings they share.
 *
 * One thread runs all of it (the poller's loop), so nothing here locks.
 * Control traffic is found through an internal epoll (also what
 * vz_sock_server_fd() returns). Received datagrams go from deliver()
 * straight onto a ring found through a 65536-entry port table; transmit
 * rings are drained round-robin. The only system calls on the data path
 * are the eventfd writes that wake an application which said it sleeps.
 *
 * Everything an application controls is untrusted: its requests, the
 * descriptors it passes, the indexes and records in its shared memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/peercred.h"
#include "sock/lib/proto.h"
#include "sock/lib/ring.h"
#include "sock/lib/server.h"

#define VZ_EPH_LO 32768u /* Linux's default ip_local_port_range */
#define VZ_EPH_HI 60999u
#define VZ_TX_BURST 32u /* datagrams from one ring before the next */
#define VZ_REQ_BURST 16u /* requests from one application per round */
#define VZ_MAX_GROUPS 1024u

struct vz_app;

struct vz_ssock {
	struct vz_app *app;
	__u32 id;
	int efd; /* the application's eventfd, to wake it */
	struct vz_sock_shm *shm;
	size_t shm_len;
	struct vz_ring rx; /* we produce */
	struct vz_ring tx; /* we consume */
	__be32 ip, peer_ip;
	__u16 port, peer_port; /* host order; 0: unbound, unconnected */
	bool reuseaddr, reuseport, broken;
	/* AF_INET6: its addresses instead of ip and peer_ip. IPv6-only, as
	 * with IPV6_V6ONLY: its port is apart from AF_INET sockets' ones. */
	bool v6;
	__u8 ip6[16], peer_ip6[16];
	struct vz_ssock *next_port; /* the sockets sharing the port */
	struct vz_ssock *next_app;
	unsigned int slot; /* in srv->socks */
};

struct vz_app {
	int fd;
	uid_t uid;
	unsigned int slot; /* in srv->apps */
	__u32 next_id;
	struct vz_ssock *socks;
	__u8 buf[sizeof(struct vz_ctl_msg)];
	size_t have;
	int fds[VZ_CTL_MAX_FDS];
	unsigned int nfds;
};

struct vz_sock_server {
	struct vz_sock_server_config cfg;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd, epfd;
	int doorbell; /* eventfd the applications write while we sleep */
	bool asleep; /* the poller_asleep words are set */
	struct vz_ssock **ports; /* 65536 lists, by host-order port */
	struct vz_app **apps;
	unsigned int napps;
	struct vz_ssock **socks;
	unsigned int nsocks, rr;
	__u32 eph_next;
	struct vz_sock_server_stats stats;
	/* vz_sock_server_poll's callback while it runs (NULL otherwise),
	 * to send what a closing socket left queued. */
	vz_sock_send_fn send_fn;
	void *send_opaque;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- shared memory ---- */

static __u32 ring_size(const struct vz_sock_server *srv, __u32 want)
{
	__u32 size = VZ_RING_MIN;

	if (want > srv->cfg.max_buf)
		want = srv->cfg.max_buf;
	while (size < want && size <= srv->cfg.max_buf / 2)
		size <<= 1;
	return size;
}

static void shm_unmap(struct vz_ssock *s)
{
	if (s->shm)
		munmap(s->shm, s->shm_len);
	s->shm = NULL;
}

/*
 * A fresh memfd for both rings, sealed so that the application (which gets
 * the descriptor) can never shrink it under our mapping. Returns the memfd
 * to pass on, or -errno.
 */
static int shm_create(struct vz_ssock *s, __u32 rx_size, __u32 tx_size)
{
	size_t len = (size_t)VZ_SHM_HDR + rx_size + tx_size;
	int fd, seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	void *p;

	fd = memfd_create("veloz-sock", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) || fcntl(fd, F_ADD_SEALS, seals))
		goto fail;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	shm_unmap(s);
	s->shm = p;
	s->shm_len = len;
	vz_ring_init(&s->rx, &s->shm->rx, (__u8 *)p + VZ_SHM_HDR, rx_size);
	vz_ring_init(&s->tx, &s->shm->tx, (__u8 *)p + VZ_SHM_HDR + rx_size,
		     tx_size);
	return fd;
fail:
	len = (size_t)errno;
	close(fd);
	return -(int)len;
}

/*
 * Wake the application if it sleeps on this ring. The fence pairs with the
 * application's (it sets `waiting`, fences, re-checks the ring): either it
 * sees our last index or we see its flag.
 */
static void vz_wake(struct vz_ssock *s, struct vz_ring_ctl *c)
{
	__u64 one = 1;
	int fl;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&c->waiting, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&c->waiting, 0, __ATOMIC_ACQ_REL))
		return;
	/* The file description is shared with the application, which could
	 * clear O_NONBLOCK to make this write block: check it each time. */
	fl = fcntl(s->efd, F_GETFL);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return;
	if (write(s->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, a wake-up is pending. */
	}
}

/* ---- ports ---- */

static bool zero6(const __u8 *a)
{
	static const __u8 zero[16];

	return !memcmp(a, zero, 16);
}

/* ip6: the address s binds (AF_INET6 sockets), NULL for IPv4. */
static bool port_clash(const struct vz_ssock *s, const struct vz_ssock *o,
		       __be32 ip, const __u8 *ip6)
{
	if (s->v6 != o->v6)
		return false;
	if (s->v6 && !zero6(o->ip6) && !zero6(ip6) && memcmp(o->ip6, ip6, 16))
		return false;
	if (o->ip && ip && o->ip != ip)
		return false;
	if (s->reuseaddr && o->reuseaddr)
		return false;
	if (s->reuseport && o->reuseport && s->app->uid == o->app->uid)
		return false;
	return true;
}

static int port_check(struct vz_sock_server *srv, const struct vz_ssock *s,
		      __be32 ip, const __u8 *ip6, __u16 port)
{
	const struct vz_ssock *o;

	for (o = srv->ports[port]; o; o = o->next_port)
		if (port_clash(s, o, ip, ip6))
			return -EADDRINUSE;
	return 0;
}

/* An ephemeral port nobody holds, as Linux picks one: from a moving
 * start, so a freed port is not reused at once. */
static int port_ephemeral(struct vz_sock_server *srv)
{
	__u32 n = VZ_EPH_HI - VZ_EPH_LO + 1, i;

	for (i = 0; i < n; i++) {
		__u32 port = VZ_EPH_LO + (srv->eph_next + i) % n;

		if (!srv->ports[port]) {
			srv->eph_next = (srv->eph_next + i + 1) % n;
			return (int)port;
		}
	}
	return -EAGAIN; /* what Linux's connect/bind answer then */
}

static int sock_bind(struct vz_sock_server *srv, struct vz_ssock *s, __be32 ip,
		     const __u8 *ip6, __u16 port)
{
	static const __u8 any6[16];
	int rc;

	if (!ip6)
		ip6 = any6;
	if (s->port)
		return -EINVAL;
	if (ip && ip != srv->cfg.local_ip4)
		return -EADDRNOTAVAIL;
	if (s->v6 && (zero6(srv->cfg.local_ip6) ||
		      (!zero6(ip6) && memcmp(ip6, srv->cfg.local_ip6, 16))))
		return -EADDRNOTAVAIL; /* no IPv6 here, or not its address */
	if (port && port < 1024 && s->app->uid != 0)
		return -EACCES;
	if (!port) {
		rc = port_ephemeral(srv);
		if (rc < 0)
			return rc;
		port = (__u16)rc;
	} else if ((rc = port_check(srv, s, ip, ip6, port))) {
		return rc;
	}
	s->ip = ip;
	memcpy(s->ip6, ip6, 16);
	s->port = port;
	s->next_port = srv->ports[port];
	srv->ports[port] = s;
	return 0;
}

static void sock_unbind(struct vz_sock_server *srv, struct vz_ssock *s)
{
	struct vz_ssock **pp;

	if (!s->port)
		return;
	for (pp = &srv->ports[s->port]; *pp; pp = &(*pp)->next_port) {
		if (*pp == s) {
			*pp = s->next_port;
			break;
		}
	}
	s->port = 0;
	s->next_port = NULL;
}

/* ---- sockets ---- */

static struct vz_ssock *sock_find(const struct vz_app *app, __u32 id)
{
	struct vz_ssock *s;

	for (s = app->socks; s; s = s->next_app)
		if (s->id == id)
			return s;
	return NULL;
}

static void sock_free(struct vz_sock_server *srv, struct vz_ssock *s)
{
	struct vz_ssock **pp;

	sock_unbind(srv, s);
	for (pp = &s->app->socks; *pp; pp = &(*pp)->next_app) {
		if (*pp == s) {
			*pp = s->next_app;
			break;
		}
	}
	srv->socks[s->slot] = srv->socks[--srv->nsocks];
	srv->socks[s->slot]->slot = s->slot;
	srv->stats.sockets = srv->nsocks;
	shm_unmap(s);
	close(s->efd);
	free(s);
}

static unsigned int drain_one(struct vz_sock_server *srv, struct vz_ssock *s,
			      vz_sock_send_fn send_fn, void *opaque,
			      unsigned int max);

/*
 * Before a socket goes (CLOSE, or its application left): send what its
 * transmit ring holds, as the kernel sends what close() finds queued. At
 * most a ring's worth of records, so an application that keeps writing to
 * its mapping cannot hold the poller here.
 */
static void sock_flush(struct vz_sock_server *srv, struct vz_ssock *s)
{
	if (srv->send_fn)
		drain_one(srv, s, srv->send_fn, srv->send_opaque,
			  s->tx.size / vz_ring_need(0));
}

/* Is fd an eventfd in non-blocking mode (what the library creates)? */
static bool is_eventfd(int fd)
{
	char link[64], target[64];
	ssize_t n;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || !(fl & O_NONBLOCK))
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return !strcmp(target, "anon_inode:[eventfd]");
}

/* ---- the control connection ---- */

static int reply(struct vz_app *app, struct vz_ctl_msg *m, int fd)
{
	union vz_ctl_cmsg c;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	m->len = sizeof(*m);
	vz_ctl_attach_fd(&mh, &c, fd);
	/* The application waits for this reply; a full buffer means it
	 * floods us with requests: it is dropped. */
	n = sendmsg(app->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

static bool reserved_zero(const struct vz_ctl_msg *m)
{
	return !m->err && !m->flags && !m->rcvbuf && !m->sndbuf &&
	       !m->reserved[0] && !m->reserved[1];
}

/* The handlers: 0 after a reply (possibly an error), -1 for a malformed
 * request or a failed reply (the application is dropped). */

static int req_socket(struct vz_sock_server *srv, struct vz_app *app,
		      struct vz_ctl_msg *m)
{
	struct vz_ssock *s;
	int memfd, rc;

	if (m->id || (m->opt != AF_INET && m->opt != AF_INET6) || m->val ||
	    m->addr || m->port || !zero6(m->addr6) || app->nfds != 1 ||
	    !is_eventfd(app->fds[0]))
		return -1;
	if (srv->nsocks >= srv->cfg.max_sockets) {
		m->err = ENOBUFS;
		return reply(app, m, -1);
	}
	if (m->opt == AF_INET6 && zero6(srv->cfg.local_ip6)) {
		m->err = EAFNOSUPPORT; /* this stack has no IPv6 address */
		return reply(app, m, -1);
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		m->err = ENOMEM;
		return reply(app, m, -1);
	}
	memfd = shm_create(s, ring_size(srv, srv->cfg.default_rcvbuf),
			   ring_size(srv, srv->cfg.default_sndbuf));
	if (memfd < 0) {
		free(s);
		m->err = -memfd;
		return reply(app, m, -1);
	}
	do
		s->id = ++app->next_id;
	while (!s->id || sock_find(app, s->id));
	s->app = app;
	s->v6 = m->opt == AF_INET6;
	s->efd = app->fds[0];
	app->nfds = 0;
	s->next_app = app->socks;
	app->socks = s;
	s->slot = srv->nsocks;
	srv->socks[srv->nsocks++] = s;
	srv->stats.sockets = srv->nsocks;
	m->id = s->id;
	m->rcvbuf = s->rx.size;
	m->sndbuf = s->tx.size;
	rc = reply(app, m, memfd);
	close(memfd); /* only the application holds it now */
	return rc;
}

/* An address of the socket's own family only. */
static bool addr_fits(const struct vz_ctl_msg *m, const struct vz_ssock *s)
{
	return s->v6 ? !m->addr : zero6(m->addr6);
}

static int req_bind(struct vz_sock_server *srv, struct vz_app *app,
		    struct vz_ctl_msg *m, struct vz_ssock *s)
{
	if (m->opt || m->val || !addr_fits(m, s))
		return -1;
	m->err = -sock_bind(srv, s, m->addr, s->v6 ? m->addr6 : NULL,
			    ntohs(m->port));
	m->addr = s->ip;
	memcpy(m->addr6, s->ip6, 16);
	m->port = htons(s->port);
	return reply(app, m, -1);
}

static int req_connect(struct vz_sock_server *srv, struct vz_app *app,
		       struct vz_ctl_msg *m, struct vz_ssock *s)
{
	if (m->opt > 1 || m->val || !addr_fits(m, s) ||
	    (m->opt && (m->addr || m->port || !zero6(m->addr6))))
		return -1;
	if (m->opt) {
		s->peer_ip = 0;
		memset(s->peer_ip6, 0, 16);
		s->peer_port = 0;
	} else {
		if (!s->port)
			m->err = -sock_bind(srv, s, 0, NULL, 0);
		if (!m->err) {
			s->peer_ip = m->addr;
			memcpy(s->peer_ip6, m->addr6, 16);
			s->peer_port = ntohs(m->port);
		}
	}
	memcpy(m->addr6, s->ip6, 16);
	m->addr = s->ip;
	m->port = htons(s->port);
	return reply(app, m, -1);
}

/*
 * SO_RCVBUF/SO_SNDBUF resize the rings by giving the socket a new memfd,
 * which needs both rings empty (no datagram is lost or copied): otherwise
 * EBUSY. Linux resizes any time; applications set buffers before traffic.
 */
static int req_setopt(struct vz_sock_server *srv, struct vz_app *app,
		      struct vz_ctl_msg *m, struct vz_ssock *s)
{
	__u32 rx = s->rx.size, tx = s->tx.size;
	int memfd = -1, rc;

	switch (m->opt) {
	case SO_REUSEADDR:
	case SO_REUSEPORT:
		if (m->val > 1 || m->addr || m->port)
			return -1;
		if (m->opt == SO_REUSEADDR)
			s->reuseaddr = m->val;
		else
			s->reuseport = m->val;
		break;
	case SO_RCVBUF:
	case SO_SNDBUF:
		if (m->addr || m->port)
			return -1;
		if (m->opt == SO_RCVBUF)
			rx = ring_size(srv, m->val);
		else
			tx = ring_size(srv, m->val);
		if (rx == s->rx.size && tx == s->tx.size)
			break;
		if (__atomic_load_n(&s->shm->rx.tail, __ATOMIC_ACQUIRE) !=
			    s->rx.pos ||
		    !vz_ring_empty(&s->tx)) {
			m->err = EBUSY;
			break;
		}
		memfd = shm_create(s, rx, tx);
		if (memfd < 0) {
			m->err = -memfd;
			memfd = -1;
		} else {
			m->flags = VZ_CTL_F_SHM;
		}
		break;
	default:
		return -1;
	}
	m->rcvbuf = s->rx.size;
	m->sndbuf = s->tx.size;
	rc = reply(app, m, memfd);
	if (memfd >= 0)
		close(memfd);
	return rc;
}

static int request(struct vz_sock_server *srv, struct vz_app *app)
{
	struct vz_ctl_msg m;
	struct vz_ssock *s;

	memcpy(&m, app->buf, sizeof(m));
	if (m.len != sizeof(m) || !reserved_zero(&m))
		return -1;
	if (m.type == VZ_CTL_SOCKET)
		return req_socket(srv, app, &m);
	if (m.type != VZ_CTL_BIND && m.type != VZ_CTL_CONNECT &&
	    !zero6(m.addr6))
		return -1;
	if (app->nfds)
		return -1;
	s = sock_find(app, m.id);
	if (!s)
		return -1;
	switch (m.type) {
	case VZ_CTL_BIND:
		return req_bind(srv, app, &m, s);
	case VZ_CTL_CONNECT:
		return req_connect(srv, app, &m, s);
	case VZ_CTL_SETOPT:
		return req_setopt(srv, app, &m, s);
	case VZ_CTL_CLOSE:
		if (m.opt || m.val || m.addr || m.port)
			return -1;
		sock_flush(srv, s);
		sock_free(srv, s);
		return reply(app, &m, -1);
	default:
		return -1;
	}
}

static void app_close_fds(struct vz_app *app)
{
	while (app->nfds)
		close(app->fds[--app->nfds]);
}

/* Take the descriptors of one recvmsg; false if anything is off. */
static bool app_take_fds(struct vz_app *app, struct msghdr *mh)
{
	struct cmsghdr *c;
	bool ok = !(mh->msg_flags & MSG_CTRUNC);

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n, i;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			ok = false;
			continue;
		}
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (app->nfds < VZ_CTL_MAX_FDS) {
				app->fds[app->nfds++] = fd;
			} else {
				close(fd);
				ok = false;
			}
		}
	}
	return ok;
}

/* Requests served, or -1 when the application left (EOF, reset) and -2
 * when it sent something malformed. */
static int app_read(struct vz_sock_server *srv, struct vz_app *app)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(VZ_CTL_MAX_FDS * sizeof(int))];
	} c;
	unsigned int done = 0;

	while (done < VZ_REQ_BURST) {
		struct iovec iov = { app->buf + app->have,
				     sizeof(app->buf) - app->have };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = c.buf,
				     .msg_controllen = sizeof(c.buf) };
		ssize_t n =
			recvmsg(app->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return (int)done;
		if (n <= 0)
			return -1;
		if (!app_take_fds(app, &mh))
			return -2;
		app->have += (size_t)n;
		if (app->have < sizeof(app->buf))
			continue;
		app->have = 0;
		if (request(srv, app))
			return -2;
		app_close_fds(app);
		done++;
	}
	return (int)done;
}

/* flush: it left (exit, close): send what its sockets queued first. */
static void app_free(struct vz_sock_server *srv, struct vz_app *app, bool flush)
{
	while (app->socks) {
		if (flush)
			sock_flush(srv, app->socks);
		sock_free(srv, app->socks);
	}
	app_close_fds(app);
	/* Explicitly: a forked child may hold a copy of the descriptor,
	 * which would keep it (and its stale pointer) in the set. */
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, app->fd, NULL);
	close(app->fd);
	srv->apps[app->slot] = srv->apps[--srv->napps];
	srv->apps[app->slot]->slot = app->slot;
	srv->stats.apps = srv->napps;
	free(app);
}

static void welcome(const struct vz_sock_server *srv, int fd, int err)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_WELCOME,
				.len = sizeof(m),
				.err = err,
				.opt = VZ_CTL_VERSION,
				.addr = srv->cfg.local_ip4 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	union vz_ctl_cmsg c;

	memcpy(m.addr6, srv->cfg.local_ip6, 16);
	vz_ctl_attach_fd(&mh, &c, err ? -1 : srv->doorbell);
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* It left already: its EOF will tell. */
	}
}

static unsigned int accept_apps(struct vz_sock_server *srv)
{
	unsigned int n = 0;

	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct vz_app *app;
		uid_t uid = (uid_t)-1;
		int fd, err = 0;

		fd = accept4(srv->lfd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return n;
		n++;
		if (!vz_peer_allowed(fd, srv->cfg.gid, &uid))
			err = EACCES;
		else if (srv->napps >= srv->cfg.max_apps)
			err = EMFILE;
		app = err ? NULL : calloc(1, sizeof(*app));
		if (!err && !app)
			err = ENOMEM;
		ev.data.ptr = app;
		if (!err && epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev))
			err = errno;
		welcome(srv, fd, err);
		if (err) {
			free(app);
			close(fd);
			srv->stats.apps_refused++;
			continue;
		}
		app->fd = fd;
		app->uid = uid;
		app->slot = srv->napps;
		srv->apps[srv->napps++] = app;
		srv->stats.apps = srv->napps;
		srv->stats.apps_total++;
	}
}

/* ---- the data path ---- */

/* A socket whose shared memory is corrupt: stop using it and drop its
 * application (its connection's EOF comes on the next round). */
static void sock_corrupt(struct vz_sock_server *srv, struct vz_ssock *s)
{
	if (s->broken)
		return;
	s->broken = true;
	srv->stats.bad_requests++;
	shutdown(s->app->fd, SHUT_RDWR);
}

static unsigned int drain_one(struct vz_sock_server *srv, struct vz_ssock *s,
			      vz_sock_send_fn send_fn, void *opaque,
			      unsigned int max)
{
	unsigned int done = 0;
	bool error = false;

	while (done < max && !s->broken) {
		struct vz_dgram_meta m = { 0 };
		struct vz_ring_rec rec;
		const __u8 *payload;
		int rc = vz_ring_peek(&s->tx, &rec, &payload);

		if (!rc)
			break;
		if (rc < 0 ||
		    rec.len > VZ_STACK_MAX_UDP + (rec.flags & VZ_RING_F_V6
							  ? VZ_RING_ADDR6
							  : 0)) {
			sock_corrupt(srv, s);
			break;
		}
		/* The library binds before sending; this is for the rest. */
		if (!s->port && sock_bind(srv, s, 0, NULL, 0))
			rc = -EAGAIN;
		else if (s->v6 != !!(rec.flags & VZ_RING_F_V6) ||
			 (s->v6 && rec.len < VZ_RING_ADDR6))
			rc = -EAFNOSUPPORT; /* not its family: the app's bug */
		else if (s->v6) {
			m.v6 = 1;
			memcpy(m.src_ip6, s->ip6, 16); /* zero: the stack's */
			memcpy(m.dst_ip6, payload, VZ_RING_ADDR6);
			m.src_port = htons(s->port);
			m.dst_port = rec.port;
			rc = send_fn(opaque, &m, payload + VZ_RING_ADDR6,
				     rec.len - VZ_RING_ADDR6);
		} else {
			m.src_ip = s->ip ? s->ip : srv->cfg.local_ip4;
			m.src_port = htons(s->port);
			m.dst_ip = rec.addr;
			m.dst_port = rec.port;
			rc = send_fn(opaque, &m, payload, rec.len);
		}
		vz_ring_release(&s->tx, rec.len);
		done++;
		if (rc < 0) {
			srv->stats.tx_errors++;
			__atomic_store_n(&s->shm->so_error, (__u32)-rc,
					 __ATOMIC_RELEASE);
			error = true;
		} else {
			srv->stats.tx_sent++;
		}
	}
	if (done)
		vz_wake(s, &s->shm->tx);
	if (error)
		vz_wake(s, &s->shm->rx); /* POLLIN reports SO_ERROR */
	return done;
}

static unsigned int drain(struct vz_sock_server *srv, vz_sock_send_fn send_fn,
			  void *opaque, unsigned int budget)
{
	unsigned int done = 0, visited, n = srv->nsocks;

	for (visited = 0; visited < n && done < budget; visited++) {
		unsigned int max = budget - done;
		struct vz_ssock *s;

		if (srv->rr >= srv->nsocks)
			srv->rr = 0;
		s = srv->socks[srv->rr++];
		done += drain_one(srv, s, send_fn, opaque,
				  max < VZ_TX_BURST ? max : VZ_TX_BURST);
	}
	return done;
}

unsigned int vz_sock_server_poll(struct vz_sock_server *srv,
				 vz_sock_send_fn send_fn, void *opaque,
				 unsigned int budget)
{
	struct epoll_event ev[16];
	unsigned int work = 0;
	int n, i;

	srv->send_fn = send_fn;
	srv->send_opaque = opaque;
	n = epoll_wait(srv->epfd, ev, 16, 0);
	for (i = 0; i < n; i++) {
		struct vz_app *app = ev[i].data.ptr;
		int rc;

		if (app == (void *)&srv->doorbell) {
			__u64 v;

			if (read(srv->doorbell, &v, sizeof(v)) < 0) {
				/* EAGAIN: another round took it */
			}
			continue;
		}
		if (!app) {
			work += accept_apps(srv);
			continue;
		}
		rc = app_read(srv, app);
		if (rc >= 0) {
			work += (unsigned int)rc;
			continue;
		}
		if (rc == -1)
			srv->stats.apps_died++;
		else
			srv->stats.bad_requests++;
		app_free(srv, app, rc == -1);
		work++;
	}
	srv->send_fn = NULL;
	srv->send_opaque = NULL;
	return work + drain(srv, send_fn, opaque, budget);
}

bool vz_sock_server_sleep_prepare(struct vz_sock_server *srv)
{
	unsigned int i;

	for (i = 0; i < srv->nsocks; i++)
		__atomic_store_n(&srv->socks[i]->shm->poller_asleep, 1,
				 __ATOMIC_SEQ_CST);
	srv->asleep = true;
	/* Pairs with the application's fence between its ring commit and
	 * its look at poller_asleep: it sees the word or we see its record. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (i = 0; i < srv->nsocks; i++)
		if (!srv->socks[i]->broken &&
		    !vz_ring_empty(&srv->socks[i]->tx))
			return false;
	return true;
}

void vz_sock_server_sleep_done(struct vz_sock_server *srv)
{
	unsigned int i;

	if (!srv->asleep)
		return;
	for (i = 0; i < srv->nsocks; i++)
		__atomic_store_n(&srv->socks[i]->shm->poller_asleep, 0,
				 __ATOMIC_RELAXED);
	srv->asleep = false;
}

/* Spreads a SO_REUSEPORT group by sender (a murmur3 finaliser). */
static __u32 sender_hash(__be32 ip, __be16 port)
{
	__u32 h = ntohl(ip) ^ ((__u32)ntohs(port) * 0x9e3779b1u);

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

static bool sock_matches(const struct vz_ssock *s,
			 const struct vz_dgram_meta *m)
{
	if (s->broken || s->v6 != !!m->v6)
		return false;
	if (s->v6)
		return zero6(s->ip6) || !memcmp(s->ip6, m->dst_ip6, 16);
	return !s->ip || s->ip == m->dst_ip;
}

static bool from_peer(const struct vz_ssock *s, const struct vz_dgram_meta *m,
		      __u16 sport)
{
	if (s->peer_port != sport)
		return false;
	return s->v6 ? !memcmp(s->peer_ip6, m->src_ip6, 16)
		     : s->peer_ip == m->src_ip;
}

/* The sender's address folded to 32 bits, for the hash. */
static __be32 sender_ip(const struct vz_dgram_meta *m)
{
	__u32 w[4];

	if (!m->v6)
		return m->src_ip;
	memcpy(w, m->src_ip6, 16);
	return w[0] ^ w[1] ^ w[2] ^ w[3];
}

/*
 * The socket a datagram goes to: one connected to its sender first, else
 * an unconnected one, chosen by the sender's hash when the first of them
 * is in a SO_REUSEPORT group.
 */
static struct vz_ssock *sock_lookup(struct vz_sock_server *srv,
				    const struct vz_dgram_meta *m)
{
	struct vz_ssock *s, *first = NULL;
	__u16 sport = ntohs(m->src_port);
	unsigned int group = 0, k;

	for (s = srv->ports[ntohs(m->dst_port)]; s; s = s->next_port) {
		if (!sock_matches(s, m))
			continue;
		if (s->peer_port) {
			if (from_peer(s, m, sport))
				return s;
			continue;
		}
		if (!first)
			first = s;
		if (s->reuseport)
			group++;
	}
	if (!first || !first->reuseport || group < 2)
		return first;
	k = sender_hash(sender_ip(m), m->src_port) % group;
	for (s = first; s; s = s->next_port)
		if (sock_matches(s, m) && !s->peer_port && s->reuseport && !k--)
			return s;
	return first;
}

int vz_sock_server_deliver(struct vz_sock_server *srv,
			   const struct vz_dgram_meta *m, const void *payload,
			   size_t len)
{
	struct vz_ssock *s = sock_lookup(srv, m);
	size_t a = m->v6 ? VZ_RING_ADDR6 : 0; /* the address, before the data */
	struct vz_ring_rec *rec;

	if (!s)
		return -1;
	rec = len <= VZ_STACK_MAX_UDP ? vz_ring_reserve(&s->rx, a + len) : NULL;
	if (!rec) {
		srv->stats.rx_ring_full++;
		return 0;
	}
	rec->len = (__u32)(a + len);
	rec->flags = m->v6 ? VZ_RING_F_V6 : 0;
	rec->addr = m->src_ip;
	rec->port = m->src_port;
	rec->reserved = 0;
	if (a)
		memcpy(rec + 1, m->src_ip6, a);
	memcpy((__u8 *)(rec + 1) + a, payload, len);
	vz_ring_commit(&s->rx, a + len);
	srv->stats.rx_queued++;
	vz_wake(s, &s->shm->rx);
	return 0;
}

/* ---- set-up ---- */

/* Make the socket's directory (0750, root:gid) unless it exists: an
 * existing one is the administrator's and is left alone. */
static int make_dir(const struct vz_sock_server *srv, char *err, size_t errlen)
{
	char dir[sizeof(srv->path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", srv->path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	if (!mkdir(dir, 0750)) {
		if (geteuid() == 0 && srv->cfg.gid != (gid_t)-1 &&
		    chown(dir, 0, srv->cfg.gid)) {
			seterr(err, errlen, "chown %s: %s", dir,
			       strerror(errno));
			return -1;
		}
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	seterr(err, errlen, "mkdir %s: %s", dir, strerror(errno));
	return -1;
}

/*
 * Bind the listening socket. A socket file already there is either a live
 * poller's (it accepts: EADDRINUSE) or a dead one's (refused: replaced).
 */
static int listen_bind(struct vz_sock_server *srv, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int probe, rc;

	memcpy(sa.sun_path, srv->path, strlen(srv->path));
	if (!bind(srv->lfd, (struct sockaddr *)&sa, sizeof(sa)))
		return 0;
	if (errno != EADDRINUSE)
		goto fail;
	if (lstat(srv->path, &st) || !S_ISSOCK(st.st_mode)) {
		errno = EADDRINUSE;
		seterr(err, errlen, "%s exists and is not a socket", srv->path);
		return -1;
	}
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		goto fail;
	rc = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
	close(probe);
	if (!rc) {
		errno = EADDRINUSE;
		seterr(err, errlen, "another poller listens on %s", srv->path);
		return -1;
	}
	if (errno != ECONNREFUSED)
		goto fail;
	if ((unlink(srv->path) && errno != ENOENT) ||
	    bind(srv->lfd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	return 0;
fail:
	rc = errno;
	seterr(err, errlen, "bind %s: %s", srv->path, strerror(rc));
	errno = rc;
	return -1;
}

static int server_open(struct vz_sock_server *srv, char *err, size_t errlen)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event bell = { .events = EPOLLIN };
	int e;

	if (make_dir(srv, err, errlen))
		return -1;
	srv->lfd =
		socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->lfd < 0) {
		seterr(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (listen_bind(srv, err, errlen))
		return -1;
	/* Before listen(): nobody can connect while the mode is the
	 * umask's. */
	if (chmod(srv->path, 0660) ||
	    (srv->cfg.gid != (gid_t)-1 && chown(srv->path, -1, srv->cfg.gid))) {
		seterr(err, errlen, "chmod/chown %s: %s", srv->path,
		       strerror(errno));
		goto unlink;
	}
	if (listen(srv->lfd, 64)) {
		seterr(err, errlen, "listen %s: %s", srv->path,
		       strerror(errno));
		goto unlink;
	}
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	bell.data.ptr = &srv->doorbell;
	if (srv->epfd < 0 || srv->doorbell < 0 ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->lfd, &ev) ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->doorbell, &bell)) {
		seterr(err, errlen, "epoll: %s", strerror(errno));
		goto unlink;
	}
	return 0;
unlink:
	e = errno;
	unlink(srv->path);
	errno = e;
	return -1;
}

static int config_check(struct vz_sock_server *srv, char *err, size_t errlen)
{
	struct vz_sock_server_config *c = &srv->cfg;

	if (!c->path || !*c->path || strlen(c->path) >= sizeof(srv->path)) {
		seterr(err, errlen, "socket path empty or over %zu bytes",
		       sizeof(srv->path) - 1);
		return -1;
	}
	snprintf(srv->path, sizeof(srv->path), "%s", c->path);
	c->path = srv->path;
	if (!c->max_apps)
		c->max_apps = 64;
	if (!c->max_sockets)
		c->max_sockets = 1024;
	if (!c->max_buf)
		c->max_buf = 16u << 20;
	if (!c->default_rcvbuf)
		c->default_rcvbuf = 256u << 10;
	if (!c->default_sndbuf)
		c->default_sndbuf = 256u << 10;
	if (c->max_buf < VZ_RING_MIN || c->max_buf > (1u << 30) ||
	    c->max_apps > 65536 || c->max_sockets > (1u << 20)) {
		seterr(err, errlen,
		       "max_buf must be 4 KiB..1 GiB, max_apps <= 65536, max_sockets <= 1M");
		return -1;
	}
	return 0;
}

struct vz_sock_server *
vz_sock_server_new(const struct vz_sock_server_config *cfg, char *err,
		   size_t errlen)
{
	struct vz_sock_server *srv = calloc(1, sizeof(*srv));
	int e;

	if (!srv) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	srv->cfg = *cfg;
	srv->lfd = srv->epfd = srv->doorbell = -1;
	if (config_check(srv, err, errlen)) {
		free(srv);
		errno = EINVAL;
		return NULL;
	}
	srv->ports = calloc(65536, sizeof(*srv->ports));
	srv->apps = calloc(srv->cfg.max_apps, sizeof(*srv->apps));
	srv->socks = calloc(srv->cfg.max_sockets, sizeof(*srv->socks));
	if (!srv->ports || !srv->apps || !srv->socks) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		goto fail;
	}
	if (getrandom(&srv->eph_next, sizeof(srv->eph_next), GRND_NONBLOCK) < 0)
		srv->eph_next = (__u32)getpid();
	if (server_open(srv, err, errlen))
		goto fail;
	return srv;
fail:
	e = errno;
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
	if (srv->doorbell >= 0)
		close(srv->doorbell);
	free(srv->ports);
	free(srv->apps);
	free(srv->socks);
	free(srv);
	errno = e;
	return NULL;
}

void vz_sock_server_free(struct vz_sock_server *srv)
{
	if (!srv)
		return;
	while (srv->napps)
		app_free(srv, srv->apps[0], false);
	close(srv->lfd);
	close(srv->epfd);
	close(srv->doorbell);
	unlink(srv->path);
	free(srv->ports);
	free(srv->apps);
	free(srv->socks);
	free(srv);
}

int vz_sock_server_fd(const struct vz_sock_server *srv)
{
	return srv->epfd;
}

const struct vz_sock_server_stats *
vz_sock_server_get_stats(const struct vz_sock_server *srv)
{
	return &srv->stats;
}
