// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock: the application's side (include/veloz/sock.h); app_internal.h
 * says which file holds what. This one: the library's state, the
 * descriptor table and the control connection to the poller.
 *
 * Control requests (socket, bind, connect, setsockopt, close) are round
 * trips to the poller over one UNIX connection, serialised by a mutex.
 * Datagrams never cross it: sendto writes the socket's transmit ring and
 * recvfrom reads its receive ring, with no system call (threads sharing a
 * socket take turns on its rings: rx_lock, tx_lock). A
 * caller that must wait sets the ring's `waiting` word, re-checks the ring
 * and sleeps in poll() on the socket's eventfd, which the poller writes
 * only when it finds the word set: no system call per datagram otherwise.
 *
 * The LD_PRELOAD shim will shadow socket(), connect(), sendmsg(),
 * recvmsg(), close(), poll(), read(), write() and fcntl() with functions
 * that call back into this library. So the library's own uses of them (on
 * its control socket and eventfds) go through `vz_client_libc`, pointers
 * resolved with dlsym(RTLD_NEXT): the next definition after this library,
 * libc's, never the shim's; the direct symbols when dlsym finds nothing.
 *
 * Sockets are not inherited across fork(): the child starts with none and
 * its own connection (a pthread_atfork handler forgets the parent's).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock/app/app_internal.h"
#include "sock/ring/proto.h"
#include "veloz/sock.h"

struct vz_client_libc vz_client_libc;
pthread_mutex_t vz_client_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t vz_client_hold_lock = PTHREAD_MUTEX_INITIALIZER;
int vz_client_doorbell = -1;
__be32 vz_client_ip4;
__u8 vz_client_ip6[16];
struct vz_app_sock **vz_client_table[VZ_FD_CHUNKS];

static pthread_once_t libc_once = PTHREAD_ONCE_INIT;
static int ctl_fd = -1;
static __u64 ctl_link; /* counts connections: a socket belongs to one */

#define VZ_RESOLVE(name)                                               \
	do {                                                           \
		void *p = dlsym(RTLD_NEXT, #name);                     \
		vz_client_libc.name =                                  \
			p ? (__typeof__(vz_client_libc.name))p : name; \
	} while (0)

static void forget_all(void);

/* Under vz_client_lock: close the link. The doorbell stays: a sender may be
 * about to write it, and a closed number could be reused by anything. */
static void ctl_close(void)
{
	if (ctl_fd >= 0)
		vz_client_libc.close(ctl_fd);
	ctl_fd = -1;
}

/* Under vz_client_lock: take a new poller's doorbell. Its number stays the same
 * for the process (dup3 swaps the file under it atomically). */
static void doorbell_take(int fd)
{
	if (fd < 0)
		return;
	if (vz_client_doorbell < 0) {
		__atomic_store_n(&vz_client_doorbell, fd, __ATOMIC_RELAXED);
		return;
	}
	if (dup3(fd, vz_client_doorbell, O_CLOEXEC) < 0) {
		/* EMFILE...: the old poller's bell; wake-ups fall back on the
		 * poller's bounded sleep */
	}
	vz_client_libc.close(fd);
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

void vz_client_libc_init(void)
{
	pthread_once(&libc_once, libc_resolve);
}

/* ---- the descriptor table ---- */

/* Under vz_client_lock. */
int vz_client_table_set(int fd, struct vz_app_sock *s)
{
	struct vz_app_sock **chunk;

	if (fd < 0 || fd >= VZ_FD_CHUNK * VZ_FD_CHUNKS)
		return -EMFILE;
	chunk = vz_client_table[fd / VZ_FD_CHUNK];
	if (!chunk) {
		chunk = calloc(VZ_FD_CHUNK, sizeof(*chunk));
		if (!chunk)
			return -ENOMEM;
		__atomic_store_n(&vz_client_table[fd / VZ_FD_CHUNK], chunk,
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&chunk[fd % VZ_FD_CHUNK], s, __ATOMIC_RELEASE);
	return 0;
}

void vz_client_unmap(struct vz_app_sock *s)
{
	if (s->shm)
		munmap(s->shm, s->shm_len);
	s->shm = NULL;
}

static void sock_free(struct vz_app_sock *s)
{
	vz_client_unmap(s);
	pthread_mutex_destroy(&s->rx_lock);
	pthread_mutex_destroy(&s->tx_lock);
	free(s);
}

/* Under vz_client_lock, the last descriptor released (s->fd, closed here; -1
 * when dup2() already replaced it); freed now, or by the last call still in
 * it (vz_client_put). */
void vz_client_destroy(struct vz_app_sock *s)
{
	static const __u64 one = 1;
	bool in_use;

	vz_epoll_sock_gone(s);
	pthread_mutex_lock(&vz_client_hold_lock);
	if (s->fd >= 0)
		vz_client_table_set(s->fd, NULL);
	__atomic_store_n(&s->closed, true, __ATOMIC_RELEASE);
	in_use = s->users > 0;
	pthread_mutex_unlock(&vz_client_hold_lock);
	if (s->fd >= 0) {
		/* a thread asleep in poll() on it holds the file: it wakes */
		if (in_use &&
		    vz_client_libc.write(s->fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: full, so it is awake already */
		}
		vz_client_libc.close(s->fd);
	}
	if (!in_use)
		sock_free(s);
}

void vz_client_put(struct vz_app_sock *s)
{
	bool last;

	pthread_mutex_lock(&vz_client_hold_lock);
	last = !--s->users && s->closed;
	pthread_mutex_unlock(&vz_client_hold_lock);
	if (last)
		sock_free(s);
}

/* Another descriptor of s than `fd` (there is one while refs > 1). */
static int other_fd(const struct vz_app_sock *s, int fd)
{
	int i, j;

	for (i = 0; i < VZ_FD_CHUNKS; i++) {
		if (!vz_client_table[i])
			continue;
		for (j = 0; j < VZ_FD_CHUNK; j++)
			if (vz_client_table[i][j] == s &&
			    i * VZ_FD_CHUNK + j != fd)
				return i * VZ_FD_CHUNK + j;
	}
	return -1;
}

/*
 * Under vz_client_lock: descriptor fd stops naming s, and is closed unless
 * `keep` (dup2 has put another file there). True when it was the last:
 * the caller then tells the poller and calls vz_client_destroy(), which closes
 * it.
 */
bool vz_client_release(int fd, struct vz_app_sock *s, bool keep)
{
	vz_client_table_set(fd, NULL);
	if (--s->refs > 0) {
		if (s->fd == fd)
			s->fd = other_fd(s, fd);
		if (!keep)
			vz_client_libc.close(fd);
		return false;
	}
	s->fd = keep ? -1 : fd;
	return true;
}

/* Drop every socket and the connection (under vz_client_lock, or in a fork
 * child where no other thread exists). */
static void drop_all(void)
{
	int i, j;

	for (i = 0; i < VZ_FD_CHUNKS; i++) {
		if (!vz_client_table[i])
			continue;
		for (j = 0; j < VZ_FD_CHUNK; j++) {
			struct vz_app_sock *s = vz_client_table[i][j];

			if (s &&
			    vz_client_release(i * VZ_FD_CHUNK + j, s, false))
				vz_client_destroy(s);
		}
	}
	ctl_close();
	if (vz_client_doorbell >= 0)
		vz_client_libc.close(vz_client_doorbell);
	vz_client_doorbell = -1;
}

static void forget_all(void)
{
	pthread_mutex_init(&vz_client_lock, NULL);
	pthread_mutex_init(&vz_client_hold_lock, NULL);
	vz_epoll_forked();
	drop_all();
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
	return (__s64)vz_now_ns() + (__s64)ms * 1000000;
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

		n = vz_client_libc.poll(&p, 1, ms_left(until));
		if (n == 0)
			return -ETIMEDOUT;
		if (n > 0)
			n = vz_client_libc.recvmsg(ctl_fd, &mh,
						   MSG_CMSG_CLOEXEC);
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
					vz_client_libc.close(fd);
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
		n = vz_client_libc.sendmsg(ctl_fd, &mh, MSG_NOSIGNAL);
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

/* Under vz_client_lock: connect and read WELCOME. */
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
	ctl_fd = vz_client_libc.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctl_fd < 0)
		return -errno;
	if (vz_client_libc.connect(ctl_fd, (struct sockaddr *)&sa,
				   sizeof(sa))) {
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
	vz_client_ip4 = m.addr;
	memcpy(vz_client_ip6, m.addr6, 16);
	ctl_link++;
	doorbell_take(bell);
	return 0;
fail:
	if (bell >= 0)
		vz_client_libc.close(bell);
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
int vz_client_ctl_call(struct vz_ctl_msg *req, int fd_out,
		       struct vz_ctl_msg *rep, int *fd_in, __u64 *link)
{
	__s64 until;
	int rc;

	req->len = sizeof(*req);
	pthread_mutex_lock(&vz_client_lock);
	until = ctl_deadline(); /* from now: another thread's call is over */
	if (*link && (ctl_fd < 0 || *link != ctl_link)) {
		pthread_mutex_unlock(&vz_client_lock);
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
	pthread_mutex_unlock(&vz_client_lock);
	return rc;
}

/* A request about socket s: 0, or -1 with errno (the poller's answer or
 * the link's failure). */
int vz_client_call(struct vz_app_sock *s, struct vz_ctl_msg *req,
		   struct vz_ctl_msg *rep, int *fd_in)
{
	int rc;

	req->id = s->id;
	rc = vz_client_ctl_call(req, -1, rep, fd_in, &s->link);
	if (!rc && rep->err)
		rc = -rep->err;
	if (rc) {
		errno = -rc;
		return -1;
	}
	return 0;
}

int vz_poller_init(const char *path)
{
	int rc;

	vz_client_libc_init();
	pthread_mutex_lock(&vz_client_lock);
	rc = ctl_open(path);
	pthread_mutex_unlock(&vz_client_lock);
	if (rc) {
		errno = -rc;
		return -1;
	}
	return 0;
}

void vz_sock_exit(void)
{
	vz_client_libc_init();
	pthread_mutex_lock(&vz_client_lock);
	drop_all(); /* the poller frees them all when the link closes */
	pthread_mutex_unlock(&vz_client_lock);
}

/* Map the memfd a reply carried, checking its size against the rings. */
int vz_client_map(struct vz_app_sock *s, int memfd, __u32 rx, __u32 tx)
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
	vz_client_unmap(s);
	s->shm = p;
	s->shm_len = len;
	vz_ring_init(&s->rx, &s->shm->rx, (__u8 *)p + VZ_SHM_HDR, rx);
	vz_ring_init(&s->tx, &s->shm->tx, (__u8 *)p + VZ_SHM_HDR + rx, tx);
	return 0;
}
