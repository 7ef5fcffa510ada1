// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: the application's side (include/veloz/sock.h).
 *
 * Control requests (socket, bind, connect, setsockopt, close) are round
 * trips to the poller over one UNIX connection, serialised by a mutex.
 * Datagrams never cross it: sendto writes the socket's transmit ring and
 * recvfrom reads its receive ring, lock-free (one thread per socket). A
 * caller that must wait sets the ring's `waiting` word, re-checks the ring
 * and sleeps in poll() on the socket's eventfd, which the poller writes
 * only when it finds the word set: no system call per datagram otherwise.
 *
 * The LD_PRELOAD shim will shadow socket(), connect(), sendmsg(),
 * recvmsg(), close(), poll(), read(), write() and fcntl() with functions
 * that call back into this library. So the library's own uses of them (on
 * its control socket and eventfds) go through `libc`, pointers resolved
 * with dlsym(RTLD_NEXT): the next definition after this library, libc's,
 * never the shim's; the direct symbols when dlsym finds nothing.
 *
 * Sockets are not inherited across fork(): the child starts with none and
 * its own connection (a pthread_atfork handler forgets the parent's).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sock/lib/busy.h"
#include "sock/lib/client.h"
#include "sock/lib/pmtu.h"
#include "sock/lib/proto.h"
#include "sock/lib/ring.h"
#include "sock/stack/stack.h"
#include "veloz/sock.h"

/* Direct mode (VZ_MODE=direct, src/sock/direct): each call goes there
 * when the process runs the stack itself. Calls test it before sock_get():
 * a direct descriptor is not in the table, and a miss there costs an
 * fcntl() system call (3% of a sending loop's time). */
#ifdef VZ_SOCK_DIRECT
#include "sock/direct/direct.h"
#define VZ_DIRECT_MODE() vz_direct_enabled()
#define VZ_DIRECT(fd, call)           \
	do {                          \
		if (vz_direct_fd(fd)) \
			return call;  \
	} while (0)
#else
#define VZ_DIRECT_MODE() false
#define VZ_DIRECT(fd, call) \
	do {                \
	} while (0)
#define vz_direct_init() 0
#define vz_direct_socket(d, t, p) (-1)
#define vz_direct_poll(f, n, t) (-1)
#define vz_direct_fd(fd) false
#endif

#define VZ_FD_CHUNK 1024
#define VZ_FD_CHUNKS 1024 /* descriptors up to 1M */

struct vz_csock {
	int fd; /* the eventfd: a veloz descriptor of it (dup() makes more) */
	int refs; /* descriptors naming it; the last close() closes it */
	__u32 id;
	__u64 link; /* the control connection it lives on */
	bool nonblock, reuseaddr, reuseport;
	struct vz_sock_shm *shm;
	size_t shm_len;
	struct vz_ring rx; /* we consume */
	struct vz_ring tx; /* we produce */
	__be32 ip, peer_ip;
	__be16 port, peer_port; /* 0: unbound, unconnected */
	struct timeval rcvtimeo, sndtimeo;
	__u32 busy_us; /* SO_BUSY_POLL: spin this long before sleeping */
	/* AF_INET6: ip6 and peer_ip6 hold its addresses, ip and peer_ip 0;
	 * its datagrams carry the peer's address in front (VZ_RING_F_V6). */
	bool v6;
	__u8 ip6[16], peer_ip6[16];
};

/* A peer or local address of either family, as the socket's own. */
struct vz_addr {
	__be32 ip;
	__u8 ip6[16];
	__be16 port;
};

static struct {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*close)(int);
	int (*poll)(struct pollfd *, nfds_t, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	int (*fcntl)(int, int, ...);
	int (*dup3)(int, int, int);
} libc;

static pthread_once_t libc_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static int ctl_fd = -1;
/* The poller's doorbell (WELCOME's eventfd): written after queueing a
 * datagram when the poller said it sleeps. -1: an old poller sent none. */
static int doorbell_fd = -1;
static __u64 ctl_link; /* counts connections: a socket belongs to one */
static __be32 local_ip4; /* the stack's, from WELCOME */
static __u8 local_ip6[16]; /* the same for IPv6 (zero: none) */
/* fd -> socket, two levels so lookups need no lock (chunks never go). */
static struct vz_csock **table[VZ_FD_CHUNKS];

#define VZ_RESOLVE(name)                                         \
	do {                                                     \
		void *p = dlsym(RTLD_NEXT, #name);               \
		libc.name = p ? (__typeof__(libc.name))p : name; \
	} while (0)

static void forget_all(void);
static int fail(int rc);

/* Under ctl_lock: close the link. The doorbell stays: a sender may be
 * about to write it, and a closed number could be reused by anything. */
static void ctl_close(void)
{
	if (ctl_fd >= 0)
		libc.close(ctl_fd);
	ctl_fd = -1;
}

/* Under ctl_lock: take a new poller's doorbell. Its number stays the same
 * for the process (dup3 swaps the file under it atomically). */
static void doorbell_take(int fd)
{
	if (fd < 0)
		return;
	if (doorbell_fd < 0) {
		__atomic_store_n(&doorbell_fd, fd, __ATOMIC_RELAXED);
		return;
	}
	if (dup3(fd, doorbell_fd, O_CLOEXEC) < 0) {
		/* EMFILE...: the old poller's bell; wake-ups fall back on the
		 * poller's bounded sleep */
	}
	libc.close(fd);
}

static void libc_resolve(void)
{
	VZ_RESOLVE(socket);
	VZ_RESOLVE(connect);
	VZ_RESOLVE(sendmsg);
	VZ_RESOLVE(recvmsg);
	VZ_RESOLVE(close);
	VZ_RESOLVE(poll);
	VZ_RESOLVE(read);
	VZ_RESOLVE(write);
	VZ_RESOLVE(fcntl);
	VZ_RESOLVE(dup3);
	pthread_atfork(NULL, NULL, forget_all);
}

static void libc_init(void)
{
	pthread_once(&libc_once, libc_resolve);
}

/* ---- the descriptor table ---- */

static struct vz_csock *lookup(int fd)
{
	struct vz_csock **chunk;

	if (fd < 0 || fd >= VZ_FD_CHUNK * VZ_FD_CHUNKS)
		return NULL;
	chunk = __atomic_load_n(&table[fd / VZ_FD_CHUNK], __ATOMIC_ACQUIRE);
	if (!chunk)
		return NULL;
	return __atomic_load_n(&chunk[fd % VZ_FD_CHUNK], __ATOMIC_ACQUIRE);
}

/* Under ctl_lock. */
static int table_set(int fd, struct vz_csock *s)
{
	struct vz_csock **chunk;

	if (fd < 0 || fd >= VZ_FD_CHUNK * VZ_FD_CHUNKS)
		return -EMFILE;
	chunk = table[fd / VZ_FD_CHUNK];
	if (!chunk) {
		chunk = calloc(VZ_FD_CHUNK, sizeof(*chunk));
		if (!chunk)
			return -ENOMEM;
		__atomic_store_n(&table[fd / VZ_FD_CHUNK], chunk,
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&chunk[fd % VZ_FD_CHUNK], s, __ATOMIC_RELEASE);
	return 0;
}

/* The socket behind fd, or NULL with errno EBADF (not open) or ENOTSOCK
 * (a kernel descriptor). */
static struct vz_csock *sock_get(int fd)
{
	struct vz_csock *s = lookup(fd);

	if (!s) {
		libc_init();
		errno = libc.fcntl(fd, F_GETFD) < 0 ? EBADF : ENOTSOCK;
	}
	return s;
}

static void sock_unmap(struct vz_csock *s)
{
	if (s->shm)
		munmap(s->shm, s->shm_len);
	s->shm = NULL;
}

/* Under ctl_lock, the last descriptor released (s->fd, closed here; -1
 * when dup2() already replaced it). */
static void sock_destroy(struct vz_csock *s)
{
	vz_epoll_sock_gone(s);
	if (s->fd >= 0) {
		table_set(s->fd, NULL);
		libc.close(s->fd);
	}
	sock_unmap(s);
	free(s);
}

/* Another descriptor of s than `fd` (there is one while refs > 1). */
static int other_fd(const struct vz_csock *s, int fd)
{
	int i, j;

	for (i = 0; i < VZ_FD_CHUNKS; i++) {
		if (!table[i])
			continue;
		for (j = 0; j < VZ_FD_CHUNK; j++)
			if (table[i][j] == s && i * VZ_FD_CHUNK + j != fd)
				return i * VZ_FD_CHUNK + j;
	}
	return -1;
}

/*
 * Under ctl_lock: descriptor fd stops naming s, and is closed unless
 * `keep` (dup2 has put another file there). True when it was the last:
 * the caller then tells the poller and calls sock_destroy(), which closes
 * it.
 */
static bool fd_release(int fd, struct vz_csock *s, bool keep)
{
	table_set(fd, NULL);
	if (--s->refs > 0) {
		if (s->fd == fd)
			s->fd = other_fd(s, fd);
		if (!keep)
			libc.close(fd);
		return false;
	}
	s->fd = keep ? -1 : fd;
	return true;
}

/* Drop every socket and the connection (under ctl_lock, or in a fork
 * child where no other thread exists). */
static void drop_all(void)
{
	int i, j;

	for (i = 0; i < VZ_FD_CHUNKS; i++) {
		if (!table[i])
			continue;
		for (j = 0; j < VZ_FD_CHUNK; j++) {
			struct vz_csock *s = table[i][j];

			if (s && fd_release(i * VZ_FD_CHUNK + j, s, false))
				sock_destroy(s);
		}
	}
	ctl_close();
	if (doorbell_fd >= 0)
		libc.close(doorbell_fd);
	doorbell_fd = -1;
}

static void forget_all(void)
{
	pthread_mutex_init(&ctl_lock, NULL);
	vz_epoll_forked();
	drop_all();
}

/* ---- time ---- */

static __s64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__s64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Milliseconds left (rounded up) for poll(), -1 for none. */
static int ms_left(__s64 until)
{
	__s64 left;

	if (until < 0)
		return -1;
	left = until - now_ns();
	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > 1000000 ? 1000000 : (int)left;
}

/* ---- the control connection ---- */

/*
 * How long a control request waits for the poller's answer: a poller that
 * is stopped or stuck must not hang socket(), bind() or close() forever.
 * When it runs out the call fails with ETIMEDOUT and the link is closed,
 * so a late answer can never be taken for the next request's (the poller
 * frees the application's sockets when it sees the hang-up).
 * $VZ_UDPD_TIMEOUT_MS overrides it.
 */
#define VZ_CTL_TIMEOUT_MS 5000

static __s64 ctl_deadline(void)
{
	const char *env = getenv("VZ_UDPD_TIMEOUT_MS");
	long ms = VZ_CTL_TIMEOUT_MS;
	char *end;

	if (env && *env) {
		long v = strtol(env, &end, 10);

		if (!*end && v > 0 && v <= 3600 * 1000)
			ms = v;
	}
	return now_ns() + (__s64)ms * 1000000;
}

static int ctl_read(void *buf, size_t len, int *fd_in, __s64 until)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(VZ_CTL_MAX_FDS * sizeof(int))];
	} c;
	size_t have = 0;

	while (have < len) {
		struct iovec iov = { (char *)buf + have, len - have };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = c.buf,
				     .msg_controllen = sizeof(c.buf) };
		struct pollfd p = { .fd = ctl_fd, .events = POLLIN };
		struct cmsghdr *cm;
		ssize_t n;

		n = libc.poll(&p, 1, ms_left(until));
		if (n == 0)
			return -ETIMEDOUT;
		if (n > 0)
			n = libc.recvmsg(ctl_fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : -ECONNRESET;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t i, k;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < k; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(fd));
				if (fd_in && *fd_in < 0)
					*fd_in = fd;
				else
					libc.close(fd);
			}
		}
		have += (size_t)n;
	}
	return 0;
}

static int ctl_write(const struct vz_ctl_msg *m, int fd_out)
{
	union vz_ctl_cmsg c;
	struct iovec iov = { (void *)m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	vz_ctl_attach_fd(&mh, &c, fd_out);
	do
		n = libc.sendmsg(ctl_fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(*m) ? 0 : -EPROTO;
}

/* The poller's path: the caller's, else the one an explicit
 * vz_sock_init() gave (a forked child reconnects there), else
 * $VZ_UDPD_SOCKET, else the default. */
static char saved_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static const char *ctl_path(const char *path)
{
	if (path) {
		if (strlen(path) < sizeof(saved_path))
			memcpy(saved_path, path, strlen(path) + 1);
		return path;
	}
	if (*saved_path)
		return saved_path;
	path = getenv("VZ_UDPD_SOCKET");
	return path && *path ? path : VZ_UDPD_DEFAULT_SOCKET;
}

/* Under ctl_lock: connect and read WELCOME. */
static int ctl_open(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vz_ctl_msg m;
	int rc, bell = -1;

	if (ctl_fd >= 0)
		return 0;
	path = ctl_path(path);
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	ctl_fd = libc.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctl_fd < 0)
		return -errno;
	if (libc.connect(ctl_fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		goto fail;
	}
	rc = ctl_read(&m, sizeof(m), &bell, ctl_deadline());
	if (!rc && (m.type != VZ_CTL_WELCOME || m.len != sizeof(m) ||
		    m.opt != VZ_CTL_VERSION))
		rc = -EPROTO;
	if (!rc && m.err)
		rc = m.err > 0 ? -m.err : -EPROTO;
	if (rc)
		goto fail;
	local_ip4 = m.addr;
	memcpy(local_ip6, m.addr6, 16);
	ctl_link++;
	doorbell_take(bell);
	return 0;
fail:
	if (bell >= 0)
		libc.close(bell);
	ctl_close();
	return rc;
}

/*
 * One request and its reply: 0 with *rep filled (its err not yet looked
 * at), or -errno for the link itself, which is then closed (every socket
 * is gone on the poller's side). *link is the connection the request's
 * socket was made on: one that has since closed gets ECONNRESET without
 * asking, as the poller would not know the socket (0: a new socket, which
 * *link is set to on success).
 */
static int ctl_call(struct vz_ctl_msg *req, int fd_out, struct vz_ctl_msg *rep,
		    int *fd_in, __u64 *link)
{
	__s64 until;
	int rc;

	req->len = sizeof(*req);
	pthread_mutex_lock(&ctl_lock);
	until = ctl_deadline(); /* from now: another thread's call is over */
	if (*link && (ctl_fd < 0 || *link != ctl_link)) {
		pthread_mutex_unlock(&ctl_lock);
		return -ECONNRESET;
	}
	rc = ctl_open(NULL);
	if (!rc)
		rc = ctl_write(req, fd_out);
	if (!rc)
		rc = ctl_read(rep, sizeof(*rep), fd_in, until);
	if (!rc && (rep->type != req->type || rep->len != sizeof(*rep)))
		rc = -EPROTO;
	if (rc && ctl_fd >= 0)
		ctl_close();
	if (!rc)
		*link = ctl_link;
	pthread_mutex_unlock(&ctl_lock);
	return rc;
}

/* A request about socket s: 0, or -1 with errno (the poller's answer or
 * the link's failure). */
static int sock_call(struct vz_csock *s, struct vz_ctl_msg *req,
		     struct vz_ctl_msg *rep, int *fd_in)
{
	int rc;

	req->id = s->id;
	rc = ctl_call(req, -1, rep, fd_in, &s->link);
	if (!rc && rep->err)
		rc = -rep->err;
	if (rc) {
		errno = -rc;
		return -1;
	}
	return 0;
}

int vz_sock_init(const char *path)
{
	int rc;

	if (VZ_DIRECT_MODE())
		return vz_direct_init();
	libc_init();
	pthread_mutex_lock(&ctl_lock);
	rc = ctl_open(path);
	pthread_mutex_unlock(&ctl_lock);
	if (rc) {
		errno = -rc;
		return -1;
	}
	return 0;
}

void vz_sock_exit(void)
{
	libc_init();
	pthread_mutex_lock(&ctl_lock);
	drop_all(); /* the poller frees them all when the link closes */
	pthread_mutex_unlock(&ctl_lock);
}

/* ---- sockets ---- */

/* Map the memfd a reply carried, checking its size against the rings. */
static int sock_map(struct vz_csock *s, int memfd, __u32 rx, __u32 tx)
{
	size_t len = (size_t)VZ_SHM_HDR + rx + tx;
	struct stat st;
	void *p;

	if (rx < VZ_RING_MIN || tx < VZ_RING_MIN || (rx & (rx - 1)) ||
	    (tx & (tx - 1)) || fstat(memfd, &st) || (size_t)st.st_size != len)
		return -EPROTO;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	sock_unmap(s);
	s->shm = p;
	s->shm_len = len;
	vz_ring_init(&s->rx, &s->shm->rx, (__u8 *)p + VZ_SHM_HDR, rx);
	vz_ring_init(&s->tx, &s->shm->tx, (__u8 *)p + VZ_SHM_HDR + rx, tx);
	return 0;
}

static int check_type(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (domain != AF_INET && domain != AF_INET6)
		return -EAFNOSUPPORT;
	if (base <= 0 || base > SOCK_PACKET)
		return -EINVAL;
	if (base == SOCK_STREAM)
		return -EPROTONOSUPPORT; /* no TCP in the stack */
	if (base != SOCK_DGRAM)
		return -ESOCKTNOSUPPORT;
	if (protocol && protocol != IPPROTO_UDP)
		return -EPROTONOSUPPORT;
	return 0;
}

int vz_socket(int domain, int type, int protocol)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_SOCKET, .opt = (__u32)domain },
			  rep;
	struct vz_csock *s;
	int rc, memfd = -1;

	if (VZ_DIRECT_MODE())
		return vz_direct_socket(domain, type, protocol);
	libc_init();
	rc = check_type(domain, type, protocol);
	if (rc)
		goto out;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	s->nonblock = type & SOCK_NONBLOCK;
	s->busy_us = vz_busy_default_us();
	vz_busy_pin_from_env();
	s->v6 = domain == AF_INET6;
	s->refs = 1;
	s->fd = eventfd(0,
			EFD_NONBLOCK | (type & SOCK_CLOEXEC ? EFD_CLOEXEC : 0));
	if (s->fd < 0) {
		rc = -errno;
		free(s);
		goto out;
	}
	rc = ctl_call(&req, s->fd, &rep, &memfd, &s->link);
	if (!rc && rep.err)
		rc = -rep.err;
	if (!rc)
		rc = memfd < 0 ? -EPROTO
			       : sock_map(s, memfd, rep.rcvbuf, rep.sndbuf);
	if (memfd >= 0)
		libc.close(memfd);
	if (!rc) {
		s->id = rep.id;
		pthread_mutex_lock(&ctl_lock);
		rc = table_set(s->fd, s);
		pthread_mutex_unlock(&ctl_lock);
	}
	if (rc) {
		sock_unmap(s);
		libc.close(s->fd); /* the poller frees its side on close */
		free(s);
		goto out;
	}
	return s->fd;
out:
	errno = -rc;
	return -1;
}

/* Tell the poller that s's last descriptor is gone, then free it. */
static void sock_last_close(struct vz_csock *s)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_CLOSE }, rep;

	/* Whatever the poller says, the descriptor is gone (as close()). */
	sock_call(s, &req, &rep, NULL);
	pthread_mutex_lock(&ctl_lock);
	sock_destroy(s);
	pthread_mutex_unlock(&ctl_lock);
}

int vz_close(int fd)
{
	struct vz_csock *s = lookup(fd);
	bool last;

	VZ_DIRECT(fd, vz_direct_close(fd));
	libc_init();
	if (!s && vz_epoll_forget(fd))
		return libc.close(
			fd); /* an epoll set that held veloz sockets */
	if (!s)
		return sock_get(fd) ? 0 : -1;
	pthread_mutex_lock(&ctl_lock);
	if (lookup(fd) != s) { /* another thread closed it first */
		pthread_mutex_unlock(&ctl_lock);
		return fail(-EBADF);
	}
	last = fd_release(fd, s, false);
	pthread_mutex_unlock(&ctl_lock);
	if (last)
		sock_last_close(s);
	return 0;
}

/*
 * dup2/dup3 for any pair where either side may be veloz's: the kernel
 * makes newfd a copy of oldfd's file (an eventfd for a veloz socket), then
 * the table follows: newfd names oldfd's socket, and a socket newfd named
 * loses that descriptor (closed if it was the last, as dup2 closes newfd).
 */
static int dup_onto(int oldfd, int newfd, int flags)
{
	struct vz_csock *so, *sn;
	bool last = false;
	int rc;

	libc_init();
	/* Direct mode keeps no copies: a copy of its eventfd would be no
	 * socket, and one made over it would leave the socket dangling. */
	if (vz_direct_fd(oldfd) || vz_direct_fd(newfd))
		return fail(-EOPNOTSUPP);
	pthread_mutex_lock(&ctl_lock);
	so = lookup(oldfd);
	sn = lookup(newfd);
	if (so && !sn && newfd >= VZ_FD_CHUNK * VZ_FD_CHUNKS) {
		pthread_mutex_unlock(&ctl_lock);
		return fail(-EMFILE); /* beyond what the table can name */
	}
	rc = libc.dup3(oldfd, newfd, flags);
	if (rc < 0) {
		pthread_mutex_unlock(&ctl_lock);
		return -1;
	}
	if (sn)
		last = fd_release(newfd, sn, true);
	if (so && !table_set(newfd, so))
		so->refs++;
	pthread_mutex_unlock(&ctl_lock);
	if (!sn)
		vz_epoll_forget(newfd); /* an epoll set it named is closed */
	if (last)
		sock_last_close(sn);
	return newfd;
}

int vz_dup(int fd)
{
	return vz_fcntl(fd, F_DUPFD, 0);
}

int vz_dup2(int oldfd, int newfd)
{
	libc_init();
	if (oldfd == newfd) /* nothing to do, once oldfd is known open */
		return libc.fcntl(oldfd, F_GETFD) < 0 ? fail(-EBADF) : newfd;
	return dup_onto(oldfd, newfd, 0);
}

int vz_dup3(int oldfd, int newfd, int flags)
{
	if (flags & ~O_CLOEXEC)
		return fail(-EINVAL);
	if (oldfd == newfd)
		return fail(-EINVAL);
	return dup_onto(oldfd, newfd, flags);
}

/* F_DUPFD, F_DUPFD_CLOEXEC: the lowest free descriptor >= min names s. */
static int dup_min(struct vz_csock *s, int fd, int cmd, int min)
{
	int nfd = libc.fcntl(fd, cmd, min), rc;

	if (nfd < 0)
		return -1;
	pthread_mutex_lock(&ctl_lock);
	rc = lookup(fd) == s ? table_set(nfd, s) : -EBADF;
	if (!rc)
		s->refs++;
	pthread_mutex_unlock(&ctl_lock);
	if (rc) {
		libc.close(nfd);
		return fail(rc);
	}
	return nfd;
}

int vz_is_socket(int fd)
{
	return lookup(fd) != NULL || vz_direct_fd(fd);
}

/* An address of the socket's family from the caller: 0 or -errno. An
 * AF_INET6 one may be RFC 2133's, without sin6_scope_id, as Linux takes. */
static int addr_get(const struct vz_csock *s, const struct sockaddr *sa,
		    socklen_t len, struct vz_addr *a)
{
	struct sockaddr_in6 sin6 = { 0 };
	struct sockaddr_in sin;

	memset(a, 0, sizeof(*a));
	if (!sa)
		return -EFAULT;
	if (s->v6) {
		if (len < 24)
			return -EINVAL;
		memcpy(&sin6, sa, len < sizeof(sin6) ? len : sizeof(sin6));
		if (sin6.sin6_family != AF_INET6)
			return -EAFNOSUPPORT;
		memcpy(a->ip6, &sin6.sin6_addr, 16);
		a->port = sin6.sin6_port;
		return 0;
	}
	if (len < sizeof(sin))
		return -EINVAL;
	memcpy(&sin, sa, sizeof(sin));
	a->ip = sin.sin_addr.s_addr;
	a->port = sin.sin_port;
	return sin.sin_family == AF_INET ? 0 : -EAFNOSUPPORT;
}

/* Copy an address out as the kernel does: truncated to *len, *len set to
 * the full size. ip6: the AF_INET6 socket's address. */
static int addr_put(const struct vz_csock *s, struct sockaddr *sa,
		    socklen_t *len, __be32 ip, const __u8 *ip6, __be16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = port };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
				     .sin6_port = port };
	const void *from = &sin;
	socklen_t full = sizeof(sin);

	if (!sa || !len)
		return -EFAULT;
	if (s->v6) {
		memcpy(&sin6.sin6_addr, ip6, 16);
		from = &sin6;
		full = sizeof(sin6);
	}
	memcpy(sa, from, *len < full ? *len : full);
	*len = full;
	return 0;
}

static int fail(int rc)
{
	errno = -rc;
	return -1;
}

int vz_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_BIND }, rep;
	struct vz_csock *s;
	struct vz_addr a;
	int rc;
	VZ_DIRECT(fd, vz_direct_bind(fd, addr, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	rc = addr_get(s, addr, len, &a);
	if (rc)
		return fail(rc);
	req.addr = a.ip;
	memcpy(req.addr6, a.ip6, 16);
	req.port = a.port;
	if (sock_call(s, &req, &rep, NULL))
		return -1;
	s->ip = rep.addr;
	memcpy(s->ip6, rep.addr6, 16);
	s->port = rep.port;
	return 0;
}

/* The kernel binds an unbound socket to an ephemeral port on its first
 * send; so do we, before the datagram reaches the ring. */
static int autobind(struct vz_csock *s)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };

	if (s->port)
		return 0;
	if (s->v6)
		return vz_bind(s->fd, (struct sockaddr *)&any6, sizeof(any6));
	return vz_bind(s->fd, (struct sockaddr *)&any, sizeof(any));
}

int vz_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_CONNECT }, rep;
	struct vz_csock *s;
	struct vz_addr a;
	int rc;
	VZ_DIRECT(fd, vz_direct_connect(fd, addr, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	if (addr && len >= sizeof(sa_family_t) &&
	    addr->sa_family == AF_UNSPEC) {
		req.opt = 1;
	} else {
		rc = addr_get(s, addr, len, &a);
		if (rc)
			return fail(rc);
		req.addr = a.ip;
		memcpy(req.addr6, a.ip6, 16);
		req.port = a.port;
	}
	if (sock_call(s, &req, &rep, NULL))
		return -1;
	s->ip = rep.addr;
	memcpy(s->ip6, rep.addr6, 16);
	s->port = rep.port;
	s->peer_ip = req.opt ? 0 : req.addr;
	memcpy(s->peer_ip6, req.addr6, 16); /* zero when dissolved */
	s->peer_port = req.opt ? 0 : req.port;
	return 0;
}

int vz_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_csock *s;
	static const __u8 any6[16];
	const __u8 *ip6;
	__be32 ip;
	VZ_DIRECT(fd, vz_direct_getsockname(fd, addr, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	ip6 = s->ip6;
	/* Connected from INADDR_ANY: the kernel shows the route's source. */
	ip = s->ip || !s->peer_port ? s->ip : local_ip4;
	if (s->v6 && s->peer_port && !memcmp(s->ip6, any6, 16))
		ip6 = local_ip6;
	return addr_put(s, addr, len, ip, ip6, s->port) ? fail(-EFAULT) : 0;
}

int vz_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct vz_csock *s;
	VZ_DIRECT(fd, vz_direct_getpeername(fd, addr, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	if (!s->peer_port)
		return fail(-ENOTCONN);
	return addr_put(s, addr, len, s->peer_ip, s->peer_ip6, s->peer_port)
		       ? fail(-EFAULT)
		       : 0;
}

/* ---- waiting ---- */

/* A deadline from SO_RCVTIMEO/SO_SNDTIMEO: -1 is none (0 there means
 * forever, as in the kernel). */
static __s64 deadline(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	if (tv->tv_sec < 0)
		return now_ns();
	return now_ns() + (__s64)tv->tv_sec * 1000000000 +
	       (__s64)tv->tv_usec * 1000;
}

static void eventfd_drain(int fd)
{
	__u64 v;

	if (libc.read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending. */
	}
}

static bool rx_ready(const struct vz_csock *s)
{
	return vz_ring_readable(&s->rx) ||
	       __atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE);
}

/*
 * Sleep until the ring may have changed (ready() true) or the deadline:
 * 0, or -EAGAIN at the deadline, -EINTR on a signal. The fence pairs with
 * the poller's vz_wake(): it sees `waiting` or we see its index.
 */
struct ring_wait {
	const struct vz_csock *s;
	bool (*ready)(const struct vz_csock *, size_t);
	size_t arg;
};

static bool ring_wait_ready(const void *arg)
{
	const struct ring_wait *w = arg;

	return w->ready(w->s, w->arg);
}

static int wait_ring(struct vz_csock *s, struct vz_ring_ctl *c,
		     bool (*ready)(const struct vz_csock *, size_t), size_t arg,
		     __s64 until)
{
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	struct ring_wait w = { s, ready, arg };
	int ms, rc = 0;

	/* SO_BUSY_POLL: the poller may answer before a sleep would pay. */
	if (s->busy_us && vz_busy_spin(ring_wait_ready, &w, s->busy_us, until))
		return 0;
	__atomic_store_n(&c->waiting, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ready(s, arg)) {
		ms = ms_left(until);
		if (!ms)
			rc = -EAGAIN;
		else if (libc.poll(&p, 1, ms) < 0)
			rc = -errno;
		eventfd_drain(s->fd);
	}
	__atomic_store_n(&c->waiting, 0, __ATOMIC_RELAXED);
	return rc;
}

static bool rx_ready_arg(const struct vz_csock *s, size_t unused)
{
	(void)unused;
	return rx_ready(s);
}

static bool tx_ready(const struct vz_csock *s, size_t len)
{
	return vz_ring_can_reserve(&s->tx, len);
}

/* SO_ERROR: take the pending error (0 if none). */
static int take_error(struct vz_csock *s)
{
	return (int)__atomic_exchange_n(&s->shm->so_error, 0, __ATOMIC_ACQ_REL);
}

/* ---- datagrams ---- */

/*
 * The poller sleeps once idle for its busy-poll time (an idle stack costs
 * no CPU); it then asks to be woken, as AF_XDP's need_wakeup does. The
 * fence pairs with the poller's: it sees our record or we see its word.
 * One write wakes it for every socket; a burst pays it at most once.
 */
static void ring_doorbell(struct vz_csock *s)
{
	static const __u64 one = 1;
	int fd;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&s->shm->poller_asleep, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&s->shm->poller_asleep, 0, __ATOMIC_ACQ_REL))
		return;
	fd = __atomic_load_n(&doorbell_fd, __ATOMIC_RELAXED);
	if (fd >= 0 && libc.write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the poller is awake */
	}
}

static int send_dest(const struct vz_csock *s, const struct sockaddr *to,
		     socklen_t tolen, struct vz_addr *a)
{
	int rc;

	if (!to) {
		if (!s->peer_port)
			return -EDESTADDRREQ;
		memset(a, 0, sizeof(*a));
		a->ip = s->peer_ip;
		memcpy(a->ip6, s->peer_ip6, 16);
		a->port = s->peer_port;
		return 0;
	}
	rc = addr_get(s, to, tolen, a);
	if (rc)
		return rc;
	return a->port ? 0 : -EINVAL;
}

ssize_t vz_sendto(int fd, const void *buf, size_t len, int flags,
		  const struct sockaddr *to, socklen_t tolen)
{
	struct vz_csock *s;
	struct vz_ring_rec *rec;
	struct vz_addr sin;
	__s64 until = -2;
	size_t a; /* the IPv6 address in front of the datagram */
	int rc;
	VZ_DIRECT(fd, vz_direct_sendto(fd, buf, len, flags, to, tolen));
	s = sock_get(fd);

	if (!s)
		return -1;
	a = s->v6 ? VZ_RING_ADDR6 : 0;
	if (flags & MSG_OOB)
		return fail(-EOPNOTSUPP);
	if (len > VZ_STACK_MAX_UDP || vz_ring_need(a + len) > s->tx.size)
		return fail(-EMSGSIZE);
	if (len && !buf)
		return fail(-EFAULT);
	rc = send_dest(s, to, tolen, &sin);
	if (rc)
		return fail(rc);
	rc = take_error(s);
	if (rc)
		return fail(-rc);
	if (autobind(s))
		return -1;
	while (!(rec = vz_ring_reserve(&s->tx, a + len))) {
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return fail(-EAGAIN);
		if (until == -2)
			until = deadline(&s->sndtimeo);
		rc = wait_ring(s, &s->shm->tx, tx_ready, a + len, until);
		if (rc)
			return fail(rc);
	}
	rec->len = (__u32)(a + len);
	rec->flags = a ? VZ_RING_F_V6 : 0;
	rec->addr = sin.ip;
	rec->port = sin.port;
	rec->reserved = 0;
	if (a)
		memcpy(rec + 1, sin.ip6, a);
	if (len)
		memcpy((__u8 *)(rec + 1) + a, buf, len);
	vz_ring_commit(&s->tx, a + len);
	ring_doorbell(s);
	return (ssize_t)len;
}

ssize_t vz_send(int fd, const void *buf, size_t len, int flags)
{
	return vz_sendto(fd, buf, len, flags, NULL, 0);
}

/* The next datagram's header and bytes, waiting if allowed: 1, or -errno
 * (including a pending SO_ERROR once the ring is empty). */
static int recv_next(struct vz_csock *s, int flags, struct vz_ring_rec *rec,
		     const __u8 **payload)
{
	__s64 until = -2;
	int rc;

	for (;;) {
		rc = vz_ring_peek(&s->rx, rec, payload);
		if (rc > 0)
			return 1;
		if (rc < 0)
			return -EIO; /* the poller wrote garbage */
		rc = take_error(s);
		if (rc)
			return -rc;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		if (until == -2)
			until = deadline(&s->rcvtimeo);
		rc = wait_ring(s, &s->shm->rx, rx_ready_arg, 0, until);
		if (rc)
			return rc;
	}
}

ssize_t vz_recvfrom(int fd, void *buf, size_t len, int flags,
		    struct sockaddr *from, socklen_t *fromlen)
{
	struct vz_csock *s;
	struct vz_ring_rec rec = { 0 };
	const __u8 *payload = NULL;
	size_t n, a, dlen;
	int rc;
	VZ_DIRECT(fd, vz_direct_recvfrom(fd, buf, len, flags, from, fromlen));
	s = sock_get(fd);

	if (!s)
		return -1;
	if (flags & (MSG_OOB | MSG_ERRQUEUE))
		return fail(-EOPNOTSUPP);
	if (len && !buf)
		return fail(-EFAULT);
	rc = recv_next(s, flags, &rec, &payload);
	if (rc < 0)
		return fail(rc);
	/* An AF_INET6 socket's datagram opens with its sender's address. */
	a = s->v6 ? VZ_RING_ADDR6 : 0;
	if (!!(rec.flags & VZ_RING_F_V6) != s->v6 || rec.len < a)
		return fail(-EIO); /* the poller wrote garbage */
	dlen = rec.len - a;
	n = dlen < len ? dlen : len;
	if (n) /* buf may be NULL when len is 0 */
		memcpy(buf, payload + a, n);
	if (from && fromlen)
		addr_put(s, from, fromlen, rec.addr, payload, rec.port);
	if (!(flags & MSG_PEEK))
		vz_ring_release(&s->rx, rec.len);
	return (ssize_t)((flags & MSG_TRUNC) ? dlen : n);
}

ssize_t vz_recv(int fd, void *buf, size_t len, int flags)
{
	return vz_recvfrom(fd, buf, len, flags, NULL, NULL);
}

/* ---- options ---- */

static int setopt_remote(struct vz_csock *s, int name, __u32 val)
{
	struct vz_ctl_msg req = { .type = VZ_CTL_SETOPT,
				  .opt = (__u32)name,
				  .val = val },
			  rep;
	int memfd = -1, rc = 0;

	if (sock_call(s, &req, &rep, &memfd)) {
		if (memfd >= 0)
			libc.close(memfd);
		return -1;
	}
	if (rep.flags & VZ_CTL_F_SHM)
		rc = memfd < 0 ? -EPROTO
			       : sock_map(s, memfd, rep.rcvbuf, rep.sndbuf);
	if (memfd >= 0)
		libc.close(memfd);
	return rc ? fail(rc) : 0;
}

static int set_timeout(struct timeval *tv, const void *val, socklen_t len)
{
	struct timeval t;

	if (len < sizeof(t))
		return fail(-EINVAL);
	memcpy(&t, val, sizeof(t));
	if (t.tv_usec < 0 || t.tv_usec >= 1000000)
		return fail(-EDOM);
	*tv = t;
	return 0;
}

int vz_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct vz_csock *s;
	int v;
	VZ_DIRECT(fd, vz_direct_setsockopt(fd, level, name, val, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY) {
		/* AF_INET6 sockets here are IPv6-only; that cannot change */
		if (!val || len < sizeof(int))
			return fail(!val ? -EFAULT : -EINVAL);
		memcpy(&v, val, sizeof(v));
		return v ? 0 : fail(-EOPNOTSUPP);
	}
	if (vz_pmtu_opt(s->v6, level, name)) {
		int err = vz_pmtu_set(val, len);

		return err ? fail(err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(-ENOPROTOOPT);
	if (!val)
		return fail(-EFAULT);
	if (name == SO_RCVTIMEO)
		return set_timeout(&s->rcvtimeo, val, len);
	if (name == SO_SNDTIMEO)
		return set_timeout(&s->sndtimeo, val, len);
	if (len < sizeof(int))
		return fail(-EINVAL);
	memcpy(&v, val, sizeof(v));
	switch (name) {
	case SO_BUSY_POLL:
		/* Linux: negative is EINVAL; our bound keeps a spin sane */
		if (v < 0 || (__u32)v > VZ_BUSY_POLL_MAX_US)
			return fail(-EINVAL);
		s->busy_us = (__u32)v;
		return 0;
	case SO_REUSEADDR:
	case SO_REUSEPORT:
		if (setopt_remote(s, name, v != 0))
			return -1;
		if (name == SO_REUSEADDR)
			s->reuseaddr = v != 0;
		else
			s->reuseport = v != 0;
		return 0;
	case SO_RCVBUF:
	case SO_SNDBUF:
		return setopt_remote(s, name, v < 0 ? 0 : (__u32)v);
	default:
		return fail(-ENOPROTOOPT);
	}
}

static int put_int(void *val, socklen_t *len, int v)
{
	if (*len < sizeof(int))
		return fail(-EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

static int put_timeval(void *val, socklen_t *len, const struct timeval *tv)
{
	if (*len < sizeof(*tv))
		return fail(-EINVAL);
	memcpy(val, tv, sizeof(*tv));
	*len = sizeof(*tv);
	return 0;
}

int vz_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct vz_csock *s;
	VZ_DIRECT(fd, vz_direct_getsockopt(fd, level, name, val, len));
	s = sock_get(fd);

	if (!s)
		return -1;
	if (s->v6 && level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		return !val || !len ? fail(-EFAULT) : put_int(val, len, 1);
	if (vz_pmtu_opt(s->v6, level, name)) {
		int err = vz_pmtu_get(val, len);

		return err ? fail(err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(-ENOPROTOOPT);
	if (!val || !len)
		return fail(-EFAULT);
	switch (name) {
	case SO_RCVBUF:
		return put_int(val, len, (int)s->rx.size);
	case SO_SNDBUF:
		return put_int(val, len, (int)s->tx.size);
	case SO_REUSEADDR:
		return put_int(val, len, s->reuseaddr);
	case SO_REUSEPORT:
		return put_int(val, len, s->reuseport);
	case SO_TYPE:
		return put_int(val, len, SOCK_DGRAM);
	case SO_DOMAIN:
		return put_int(val, len, s->v6 ? AF_INET6 : AF_INET);
	case SO_PROTOCOL:
		return put_int(val, len, IPPROTO_UDP);
	case SO_ERROR:
		if (*len < sizeof(int))
			return fail(-EINVAL);
		return put_int(val, len, take_error(s));
	case SO_RCVTIMEO:
		return put_timeval(val, len, &s->rcvtimeo);
	case SO_BUSY_POLL:
		return put_int(val, len, (int)s->busy_us);
	case SO_SNDTIMEO:
		return put_timeval(val, len, &s->sndtimeo);
	default:
		return fail(-ENOPROTOOPT);
	}
}

int vz_fcntl(int fd, int cmd, int arg)
{
	struct vz_csock *s;
	VZ_DIRECT(fd, vz_direct_fcntl(fd, cmd, arg));
	s = sock_get(fd);

	if (!s)
		return -1;
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		/* The eventfd itself stays non-blocking: only we read it. */
		s->nonblock = arg & O_NONBLOCK;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return libc.fcntl(fd, cmd, arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return dup_min(s, fd, cmd, arg);
	default:
		return fail(-EINVAL);
	}
}

/* ---- poll and select ---- */

/* A veloz descriptor's readiness from its rings. */
static short sock_revents(const struct vz_csock *s, short events)
{
	short r = 0;
	__u32 half = s->tx.size / 2;

	if (__atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE))
		r |= POLLERR | (events & POLLIN);
	if ((events & POLLIN) && vz_ring_readable(&s->rx))
		r |= POLLIN;
	/* Writable as Linux's sock_writeable(): half the buffer free, or
	 * room for the largest datagram. */
	if ((events & POLLOUT) &&
	    s->tx.size - vz_ring_used(&s->tx) >=
		    (half < vz_ring_need(VZ_STACK_MAX_UDP)
			     ? half
			     : vz_ring_need(VZ_STACK_MAX_UDP)))
		r |= POLLOUT;
	return r;
}

/* Fill revents of the veloz entries; the number of ready entries. */
static int poll_veloz(struct pollfd *fds, nfds_t n, struct vz_csock **socks)
{
	int ready = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (!socks[i])
			continue;
		fds[i].revents = sock_revents(socks[i], fds[i].events);
		if (fds[i].revents)
			ready++;
	}
	return ready;
}

static void sock_set_waiting(struct vz_csock *s, short events, __u32 on)
{
	if (events & POLLIN)
		__atomic_store_n(&s->shm->rx.waiting, on, __ATOMIC_SEQ_CST);
	if (events & POLLOUT)
		__atomic_store_n(&s->shm->tx.waiting, on, __ATOMIC_SEQ_CST);
}

static void set_waiting(struct pollfd *fds, nfds_t n, struct vz_csock **socks,
			__u32 on)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		if (socks[i])
			sock_set_waiting(socks[i], fds[i].events, on);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- for epoll.c (client.h) ---- */

struct vz_csock *vz_client_lookup(int fd)
{
	return lookup(fd);
}

short vz_client_revents(const struct vz_csock *s, short events)
{
	return sock_revents(s, events);
}

void vz_client_set_waiting(struct vz_csock *s, short events, __u32 on)
{
	sock_set_waiting(s, events, on);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int vz_client_efd(const struct vz_csock *s)
{
	return s->fd;
}

__u32 vz_client_busy_us(const struct vz_csock *s)
{
	return s->busy_us;
}

void vz_client_drain(int efd)
{
	libc_init();
	eventfd_drain(efd);
}

void vz_client_marks(const struct vz_csock *s, __u32 mark[3])
{
	mark[0] = __atomic_load_n(&s->shm->rx.head, __ATOMIC_ACQUIRE);
	mark[1] = __atomic_load_n(&s->shm->tx.tail, __ATOMIC_ACQUIRE);
	mark[2] = __atomic_load_n(&s->shm->so_error, __ATOMIC_ACQUIRE);
}

/*
 * One kernel poll() over the kernel descriptors and the veloz ones'
 * eventfds, then recompute: the number of ready entries, 0 on timeout,
 * -errno. When a veloz entry is ready already, the kernel ones are only
 * looked at (timeout 0); else it sleeps, the waiting words set first so the
 * poller writes the eventfds.
 */
static int poll_kernel(struct pollfd *fds, nfds_t n, struct vz_csock **socks,
		       struct pollfd *k, __s64 until)
{
	int rc, ready = poll_veloz(fds, n, socks);
	bool sleep = !ready;
	nfds_t i;

	for (;;) {
		if (sleep) {
			set_waiting(fds, n, socks, 1);
			ready = poll_veloz(fds, n, socks);
		}
		for (i = 0; i < n; i++) {
			k[i] = fds[i];
			k[i].revents = 0;
			if (socks[i])
				k[i].events = POLLIN;
			if (socks[i] && !sleep)
				k[i].fd = -1; /* ignored by the kernel */
		}
		rc = libc.poll(k, n, ready ? 0 : ms_left(until));
		if (sleep)
			set_waiting(fds, n, socks, 0);
		if (rc < 0)
			return -errno;
		ready = 0;
		for (i = 0; i < n; i++) {
			if (socks[i]) {
				if (k[i].revents & POLLIN)
					eventfd_drain(k[i].fd);
				continue;
			}
			fds[i].revents = k[i].revents;
			if (fds[i].revents)
				ready++;
		}
		ready += poll_veloz(fds, n, socks);
		if (ready || !ms_left(until))
			return ready;
		sleep = true;
	}
}

struct poll_spin {
	struct pollfd *fds;
	nfds_t n;
	struct vz_csock **socks;
};

static bool poll_spin_ready(const void *arg)
{
	const struct poll_spin *p = arg;

	return poll_veloz(p->fds, p->n, p->socks) > 0;
}

/*
 * SO_BUSY_POLL for poll(), as net.core.busy_poll: when every entry is a
 * veloz socket (a kernel descriptor could only be looked at by a system
 * call per turn), spin the longest of their budgets before sleeping.
 */
static int poll_busy(struct pollfd *fds, nfds_t n, struct vz_csock **socks,
		     __s64 until)
{
	struct poll_spin p = { fds, n, socks };
	__u32 us = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (!socks[i] && fds[i].fd >= 0)
			return 0;
		if (socks[i] && socks[i]->busy_us > us)
			us = socks[i]->busy_us;
	}
	if (!us || !vz_busy_spin(poll_spin_ready, &p, us, until))
		return 0;
	return poll_veloz(fds, n, socks);
}

int vz_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	struct vz_csock *small_s[16], **socks = small_s;
	struct pollfd small_k[16], *k = small_k;
	__s64 until =
		timeout_ms < 0 ? -1 : now_ns() + (__s64)timeout_ms * 1000000;
	bool any = false;
	int rc;
	nfds_t i;
	if (VZ_DIRECT_MODE())
		return vz_direct_poll(fds, n, timeout_ms);

	libc_init();
	if (n > 16) {
		socks = calloc(n, sizeof(*socks));
		k = calloc(n, sizeof(*k));
		if (!socks || !k) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		socks[i] = lookup(fds[i].fd);
		any |= socks[i] != NULL;
		fds[i].revents = 0;
	}
	if (!any) {
		rc = libc.poll(fds, n, timeout_ms);
		rc = rc < 0 ? -errno : rc;
		goto out;
	}
	rc = timeout_ms ? poll_busy(fds, n, socks, until) : 0;
	if (!rc)
		rc = poll_kernel(fds, n, socks, k, until);
out:
	if (socks != small_s)
		free(socks);
	if (k != small_k)
		free(k);
	return rc < 0 ? fail(rc) : rc;
}

/* select() as poll(): the sets become entries and back. */
int vz_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
	      struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, rc, ms = -1;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return fail(-EINVAL);
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0)
			return fail(-EINVAL);
		ms = (int)(timeout->tv_sec * 1000 +
			   (timeout->tv_usec + 999) / 1000);
	}
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p)
		return fail(-ENOMEM);
	for (i = 0; i < nfds; i++) {
		short ev = (short)((rd && FD_ISSET(i, rd) ? POLLIN : 0) |
				   (wr && FD_ISSET(i, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(i, ex) ? POLLPRI : 0));

		if (ev)
			p[n++] = (struct pollfd){ .fd = i, .events = ev };
	}
	rc = vz_poll(p, (nfds_t)n, ms);
	if (rc < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (p[i].revents & POLLNVAL) {
			rc = fail(-EBADF);
			goto out;
		}
	}
	if (rd)
		FD_ZERO(rd);
	if (wr)
		FD_ZERO(wr);
	if (ex)
		FD_ZERO(ex);
	rc = 0;
	for (i = 0; i < n; i++) {
		short r = p[i].revents;

		if (rd && (p[i].events & POLLIN) &&
		    (r & (POLLIN | POLLHUP | POLLERR)) && ++rc)
			FD_SET(p[i].fd, rd);
		if (wr && (p[i].events & POLLOUT) &&
		    (r & (POLLOUT | POLLERR)) && ++rc)
			FD_SET(p[i].fd, wr);
		if (ex && (p[i].events & POLLPRI) && (r & POLLPRI) && ++rc)
			FD_SET(p[i].fd, ex);
	}
out:
	free(p);
	return rc;
}
