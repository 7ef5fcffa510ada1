// SPDX-License-Identifier: BSD-2-Clause
/*
 * The poller's socket table: the applications' connections (accepted if
 * root or in the configured group, welcomed with the stack's addresses
 * and the doorbell) and their control requests (socket, bind, connect,
 * setsockopt, close), served without blocking, a burst per application
 * and round. Everything an application sends is untrusted: a malformed
 * request drops the application.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/peercred.h"
#include "sock/poller/poller_internal.h"

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

/* A SOCKET request carries the family, the socket's eventfd and nothing
 * else. */
static bool socket_malformed(const struct vz_app *app,
			     const struct vz_ctl_msg *m)
{
	return m->id || (m->opt != AF_INET && m->opt != AF_INET6) || m->val ||
	       m->addr || m->port || !zero6(m->addr6) || app->nfds != 1 ||
	       !is_eventfd(app->fds[0]);
}

/* Why a well-formed SOCKET is refused (an errno for the reply), 0 when it
 * may be made. */
static int socket_refused(const struct vz_sock_server *srv,
			  const struct vz_ctl_msg *m)
{
	if (srv->nsocks >= srv->cfg.max_sockets)
		return ENOBUFS;
	if (m->opt == AF_INET6 && zero6(srv->cfg.local_ip6))
		return EAFNOSUPPORT; /* this stack has no IPv6 address */
	return 0;
}

/* A new socket joins its application's list and the server's table,
 * with an id the application holds no other socket under. */
static void sock_enter(struct vz_sock_server *srv, struct vz_app *app,
		       struct vz_poller_sock *s, bool v6)
{
	do
		s->id = ++app->next_id;
	while (!s->id || vz_srv_sock_find(app, s->id));
	s->app = app;
	s->v6 = v6;
	s->efd = app->fds[0];
	app->nfds = 0;
	s->next_app = app->socks;
	app->socks = s;
	s->slot = srv->nsocks;
	srv->socks[srv->nsocks++] = s;
	srv->stats.sockets = srv->nsocks;
}

static int req_socket(struct vz_sock_server *srv, struct vz_app *app,
		      struct vz_ctl_msg *m)
{
	struct vz_poller_sock *s;
	int memfd, rc;

	if (socket_malformed(app, m))
		return -1;
	m->err = socket_refused(srv, m);
	if (m->err)
		return reply(app, m, -1);
	s = calloc(1, sizeof(*s));
	if (!s) {
		m->err = ENOMEM;
		return reply(app, m, -1);
	}
	memfd = vz_srv_shm_create(
		s, vz_srv_ring_size(srv, srv->cfg.default_rcvbuf),
		vz_srv_ring_size(srv, srv->cfg.default_sndbuf));
	if (memfd < 0) {
		free(s);
		m->err = -memfd;
		return reply(app, m, -1);
	}
	sock_enter(srv, app, s, m->opt == AF_INET6);
	m->id = s->id;
	m->rcvbuf = s->rx.size;
	m->sndbuf = s->tx.size;
	rc = reply(app, m, memfd);
	close(memfd); /* only the application holds it now */
	return rc;
}

/* An address of the socket's own family only. */
static bool addr_fits(const struct vz_ctl_msg *m,
		      const struct vz_poller_sock *s)
{
	return s->v6 ? !m->addr : zero6(m->addr6);
}

static int req_bind(struct vz_sock_server *srv, struct vz_app *app,
		    struct vz_ctl_msg *m, struct vz_poller_sock *s)
{
	if (m->opt || m->val || !addr_fits(m, s))
		return -1;
	m->err = -vz_srv_sock_bind(srv, s, m->addr, s->v6 ? m->addr6 : NULL,
				   ntohs(m->port));
	m->addr = s->ip;
	memcpy(m->addr6, s->ip6, 16);
	m->port = htons(s->port);
	return reply(app, m, -1);
}

static int req_connect(struct vz_sock_server *srv, struct vz_app *app,
		       struct vz_ctl_msg *m, struct vz_poller_sock *s)
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
			m->err = -vz_srv_sock_bind(srv, s, 0, NULL, 0);
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
 * The new memfd to pass on, or -1: no change, or m->err says why not.
 */
static int sock_resize(struct vz_sock_server *srv, struct vz_ctl_msg *m,
		       struct vz_poller_sock *s)
{
	__u32 rx = s->rx.size, tx = s->tx.size;
	int memfd;

	if (m->opt == SO_RCVBUF)
		rx = vz_srv_ring_size(srv, m->val);
	else
		tx = vz_srv_ring_size(srv, m->val);
	if (rx == s->rx.size && tx == s->tx.size)
		return -1;
	if (__atomic_load_n(&s->shm->rx.tail, __ATOMIC_ACQUIRE) != s->rx.pos ||
	    !vz_ring_empty(&s->tx)) {
		m->err = EBUSY;
		return -1;
	}
	memfd = vz_srv_shm_create(s, rx, tx);
	if (memfd < 0) {
		m->err = -memfd;
		return -1;
	}
	m->flags = VZ_CTL_F_SHM;
	return memfd;
}

static int req_setopt(struct vz_sock_server *srv, struct vz_app *app,
		      struct vz_ctl_msg *m, struct vz_poller_sock *s)
{
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
		memfd = sock_resize(srv, m, s);
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

/* CLOSE: what the socket queued goes out first, as with close(). */
static int req_close(struct vz_sock_server *srv, struct vz_app *app,
		     struct vz_ctl_msg *m, struct vz_poller_sock *s)
{
	if (m->opt || m->val || m->addr || m->port)
		return -1;
	vz_srv_sock_flush(srv, s);
	vz_srv_sock_free(srv, s);
	return reply(app, m, -1);
}

static int request(struct vz_sock_server *srv, struct vz_app *app)
{
	struct vz_ctl_msg m;
	struct vz_poller_sock *s;

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
	s = vz_srv_sock_find(app, m.id);
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
		return req_close(srv, app, &m, s);
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
int vz_srv_app_read(struct vz_sock_server *srv, struct vz_app *app)
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
void vz_srv_app_free(struct vz_sock_server *srv, struct vz_app *app, bool flush)
{
	while (app->socks) {
		if (flush)
			vz_srv_sock_flush(srv, app->socks);
		vz_srv_sock_free(srv, app->socks);
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

unsigned int vz_srv_accept_apps(struct vz_sock_server *srv)
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
