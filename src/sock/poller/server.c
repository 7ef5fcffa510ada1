// SPDX-License-Identifier: BSD-2-Clause
/*
 * The poller's socket table: applications (one UNIX stream connection
 * each), their sockets, the ports they hold and the rings they share.
 * poller_internal.h says which file holds what; this one: set-up and teardown,
 * the shared memory, the ports and the sockets.
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
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "sock/poller/poller_internal.h"

void vz_srv_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- shared memory ---- */

__u32 vz_srv_ring_size(const struct vz_sock_server *srv, __u32 want)
{
	__u32 size = VZ_RING_MIN;

	if (want > srv->cfg.max_buf)
		want = srv->cfg.max_buf;
	while (size < want && size <= srv->cfg.max_buf / 2)
		size <<= 1;
	return size;
}

static void shm_unmap(struct vz_poller_sock *s)
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
int vz_srv_shm_create(struct vz_poller_sock *s, __u32 rx_size, __u32 tx_size)
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

/* ip6: the address s binds (AF_INET6 sockets), NULL for IPv4. */
static bool port_clash(const struct vz_poller_sock *s,
		       const struct vz_poller_sock *o, __be32 ip,
		       const __u8 *ip6)
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

static int port_check(struct vz_sock_server *srv,
		      const struct vz_poller_sock *s, __be32 ip,
		      const __u8 *ip6, __u16 port)
{
	const struct vz_poller_sock *o;

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

int vz_srv_sock_bind(struct vz_sock_server *srv, struct vz_poller_sock *s,
		     __be32 ip, const __u8 *ip6, __u16 port)
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

static void sock_unbind(struct vz_sock_server *srv, struct vz_poller_sock *s)
{
	struct vz_poller_sock **pp;

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

struct vz_poller_sock *vz_srv_sock_find(const struct vz_app *app, __u32 id)
{
	struct vz_poller_sock *s;

	for (s = app->socks; s; s = s->next_app)
		if (s->id == id)
			return s;
	return NULL;
}

void vz_srv_sock_free(struct vz_sock_server *srv, struct vz_poller_sock *s)
{
	struct vz_poller_sock **pp;

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

/*
 * Before a socket goes (CLOSE, or its application left): send what its
 * transmit ring holds, as the kernel sends what close() finds queued. At
 * most a ring's worth of records, so an application that keeps writing to
 * its mapping cannot hold the poller here.
 */
void vz_srv_sock_flush(struct vz_sock_server *srv, struct vz_poller_sock *s)
{
	if (srv->send_fn)
		vz_srv_drain_one(srv, s, srv->send_fn, srv->send_opaque,
				 s->tx.size / vz_ring_need(0));
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
			vz_srv_seterr(err, errlen, "chown %s: %s", dir,
				      strerror(errno));
			return -1;
		}
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	vz_srv_seterr(err, errlen, "mkdir %s: %s", dir, strerror(errno));
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
		vz_srv_seterr(err, errlen, "%s exists and is not a socket",
			      srv->path);
		return -1;
	}
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		goto fail;
	rc = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
	close(probe);
	if (!rc) {
		errno = EADDRINUSE;
		vz_srv_seterr(err, errlen, "another poller listens on %s",
			      srv->path);
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
	vz_srv_seterr(err, errlen, "bind %s: %s", srv->path, strerror(rc));
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
		vz_srv_seterr(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (listen_bind(srv, err, errlen))
		return -1;
	/* Before listen(): nobody can connect while the mode is the
	 * umask's. */
	if (chmod(srv->path, 0660) ||
	    (srv->cfg.gid != (gid_t)-1 && chown(srv->path, -1, srv->cfg.gid))) {
		vz_srv_seterr(err, errlen, "chmod/chown %s: %s", srv->path,
			      strerror(errno));
		goto unlink;
	}
	if (listen(srv->lfd, 64)) {
		vz_srv_seterr(err, errlen, "listen %s: %s", srv->path,
			      strerror(errno));
		goto unlink;
	}
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	bell.data.ptr = &srv->doorbell;
	if (srv->epfd < 0 || srv->doorbell < 0 ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->lfd, &ev) ||
	    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->doorbell, &bell)) {
		vz_srv_seterr(err, errlen, "epoll: %s", strerror(errno));
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
		vz_srv_seterr(err, errlen,
			      "socket path empty or over %zu bytes",
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
		vz_srv_seterr(
			err, errlen,
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
		vz_srv_seterr(err, errlen, "out of memory");
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
		vz_srv_seterr(err, errlen, "out of memory");
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
		vz_srv_app_free(srv, srv->apps[0], false);
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
