/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libveloz-sock's application side, shared by the files that implement
 * it (hidden, not part of the library's ABI):
 *
 *   client.c    the library's state, the descriptor table, the control
 *               connection to the poller (proto.h), init and exit
 *   socket.c    socket, close, dup, fcntl, bind, connect and the names
 *   datagram.c  the data path: sendto and recvfrom on the socket's rings
 *               (ring.h), and waiting for them
 *   sockopt.c   setsockopt, getsockopt
 *   poll.c      poll and select (and what epoll.c asks, client.h)
 *   epoll.c     epoll over veloz and kernel descriptors together
 *   mmsg.c      sendmsg, recvmsg and their mmsg forms, over sendto and
 *               recvfrom
 *   busy.c      busy polling (SO_BUSY_POLL, VZ_BUSY_POLL_US), both modes'
 *   mode.c      the public calls, each run by the mode that owns the
 *               descriptor (mode.h), and poller mode's table of the
 *               vz_poller_ calls below
 *
 * What the data path calls on every datagram is here as static inline
 * (the descriptor lookup, addresses, errors, time), so splitting the
 * files costs it no call.
 */
#ifndef VZ_SOCK_APP_APP_INTERNAL_H
#define VZ_SOCK_APP_APP_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "sock/app/client.h"
#include "sock/app/clock.h"
#include "sock/app/mode.h"
#include "sock/ring/ring.h"

#define VZ_FD_CHUNK 1024
#define VZ_FD_CHUNKS 1024 /* descriptors up to 1M */

struct vz_app_sock {
	int fd; /* the eventfd: a veloz descriptor of it (dup() makes more) */
	int refs; /* descriptors naming it; the last close() closes it */
	__u32 id;
	__u64 link; /* the control connection it lives on */
	bool nonblock, reuseaddr, reuseport;
	struct vz_sock_shm *shm;
	size_t shm_len;
	struct vz_ring rx; /* we consume */
	struct vz_ring tx; /* we produce */
	/* The rings have one consumer and one producer on each side: threads
	 * that share the socket (dup() copies in several epoll sets) take
	 * turns on ours. Held only while a record is read or written, never
	 * while waiting. */
	pthread_mutex_t rx_lock, tx_lock;
	/* Calls in sendto or recvfrom (under vz_client_hold_lock): the last
	 * close() leaves it to the last of them to free the socket, and wakes
	 * one that sleeps; it then fails with EBADF, as in direct mode. */
	int users;
	bool closed;
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

/*
 * The LD_PRELOAD shim shadows socket(), connect(), sendmsg(), recvmsg(),
 * close(), poll(), read(), write() and fcntl(): the library's own uses of
 * them go through these, resolved with dlsym(RTLD_NEXT) (client.c).
 */
struct vz_client_libc {
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
};

/* client.c's state. */
VZ_HIDDEN extern struct vz_client_libc vz_client_libc;
/* Serialises control requests and every change of the table. */
VZ_HIDDEN extern pthread_mutex_t vz_client_lock;
/* Guards each socket's users and closed (sock_hold); never held long. */
VZ_HIDDEN extern pthread_mutex_t vz_client_hold_lock;
/* The poller's doorbell (WELCOME's eventfd): written after queueing a
 * datagram when the poller said it sleeps. -1: an old poller sent none. */
VZ_HIDDEN extern int vz_client_doorbell;
/* The stack's addresses, from WELCOME (ip6 zero: none). */
VZ_HIDDEN extern __be32 vz_client_ip4;
VZ_HIDDEN extern __u8 vz_client_ip6[16];
/* fd -> socket, two levels so lookups need no lock (chunks never go). */
VZ_HIDDEN extern struct vz_app_sock **vz_client_table[VZ_FD_CHUNKS];

/* Resolve vz_client_libc, once. */
VZ_HIDDEN void vz_client_libc_init(void);

/* The descriptor table (client.c), under vz_client_lock. */
VZ_HIDDEN int vz_client_table_set(int fd, struct vz_app_sock *s);
/* Descriptor fd stops naming s, closed unless `keep`; true when it was
 * the last (the caller tells the poller, then vz_client_destroy()). */
VZ_HIDDEN bool vz_client_release(int fd, struct vz_app_sock *s, bool keep);
VZ_HIDDEN void vz_client_destroy(struct vz_app_sock *s);
VZ_HIDDEN void vz_client_unmap(struct vz_app_sock *s);
/* Map the rings' memfd a reply carried: 0 or -errno. */
VZ_HIDDEN int vz_client_map(struct vz_app_sock *s, int memfd, __u32 rx,
			    __u32 tx);

/* The control connection (client.c): one request and its reply, 0 or
 * -errno for the link; about socket s, 0 or -1 with errno. */
struct vz_ctl_msg;
VZ_HIDDEN int vz_client_ctl_call(struct vz_ctl_msg *req, int fd_out,
				 struct vz_ctl_msg *rep, int *fd_in,
				 __u64 *link);
VZ_HIDDEN int vz_client_call(struct vz_app_sock *s, struct vz_ctl_msg *req,
			     struct vz_ctl_msg *rep, int *fd_in);

/* Bind an unbound socket to an ephemeral port, as the kernel does on the
 * first send (socket.c): 0 or -1 with errno. */
VZ_HIDDEN int vz_client_autobind(struct vz_app_sock *s);

/* Poller mode's operations (mode.h), each include/veloz/sock.h's call of
 * that name for a descriptor no other mode owns. */
VZ_HIDDEN int vz_poller_init(const char *path);
VZ_HIDDEN int vz_poller_socket(int domain, int type, int protocol);
VZ_HIDDEN int vz_poller_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
VZ_HIDDEN int vz_poller_close(int fd);
VZ_HIDDEN int vz_poller_dup3(int oldfd, int newfd, int flags);
VZ_HIDDEN int vz_poller_fcntl(int fd, int cmd, int arg);
VZ_HIDDEN int vz_poller_bind(int fd, const struct sockaddr *addr,
			     socklen_t len);
VZ_HIDDEN int vz_poller_connect(int fd, const struct sockaddr *addr,
				socklen_t len);
VZ_HIDDEN int vz_poller_getsockname(int fd, struct sockaddr *addr,
				    socklen_t *len);
VZ_HIDDEN int vz_poller_getpeername(int fd, struct sockaddr *addr,
				    socklen_t *len);
VZ_HIDDEN int vz_poller_getsockopt(int fd, int level, int name, void *val,
				   socklen_t *len);
VZ_HIDDEN int vz_poller_setsockopt(int fd, int level, int name, const void *val,
				   socklen_t len);
VZ_HIDDEN ssize_t vz_poller_sendto(int fd, const void *buf, size_t len,
				   int flags, const struct sockaddr *to,
				   socklen_t tolen);
VZ_HIDDEN ssize_t vz_poller_recvfrom(int fd, void *buf, size_t len, int flags,
				     struct sockaddr *from, socklen_t *fromlen);

static inline int fail(int rc)
{
	errno = -rc;
	return -1;
}

static inline struct vz_app_sock *lookup(int fd)
{
	struct vz_app_sock **chunk;

	if (fd < 0 || fd >= VZ_FD_CHUNK * VZ_FD_CHUNKS)
		return NULL;
	chunk = __atomic_load_n(&vz_client_table[fd / VZ_FD_CHUNK],
				__ATOMIC_ACQUIRE);
	if (!chunk)
		return NULL;
	return __atomic_load_n(&chunk[fd % VZ_FD_CHUNK], __ATOMIC_ACQUIRE);
}

/* The socket behind fd, or NULL with errno EBADF (not open) or ENOTSOCK
 * (a kernel descriptor). */
static inline struct vz_app_sock *sock_get(int fd)
{
	struct vz_app_sock *s = lookup(fd);

	if (!s) {
		vz_client_libc_init();
		errno = vz_client_libc.fcntl(fd, F_GETFD) < 0 ? EBADF
							      : ENOTSOCK;
	}
	return s;
}

/* sock_get() for a call that may wait (sendto, recvfrom): the socket stays
 * allocated until vz_client_put(), whoever closes its descriptors
 * meanwhile. */
static inline struct vz_app_sock *sock_hold(int fd)
{
	struct vz_app_sock *s;

	pthread_mutex_lock(&vz_client_hold_lock);
	s = lookup(fd);
	if (s)
		s->users++;
	pthread_mutex_unlock(&vz_client_hold_lock);
	return s ? s : sock_get(fd);
}

VZ_HIDDEN void vz_client_put(struct vz_app_sock *s);

/* Milliseconds left (rounded up) for poll(), -1 for none; a long wait
 * wakes every 1000 s to look again. */
static inline int ms_left(__s64 until)
{
	return vz_ms_left(until, 1000000);
}

static inline void eventfd_drain(int fd)
{
	__u64 v;

	if (vz_client_libc.read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending. */
	}
}

/* SO_ERROR: take the pending error (0 if none). */
static inline int take_error(struct vz_app_sock *s)
{
	return (int)__atomic_exchange_n(&s->shm->so_error, 0, __ATOMIC_ACQ_REL);
}

/* An address of the socket's family from the caller: 0 or -errno. An
 * AF_INET6 one may be RFC 2133's, without sin6_scope_id, as Linux takes. */
static inline int addr_get(const struct vz_app_sock *s,
			   const struct sockaddr *sa, socklen_t len,
			   struct vz_addr *a)
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
static inline int addr_put(const struct vz_app_sock *s, struct sockaddr *sa,
			   socklen_t *len, __be32 ip, const __u8 *ip6,
			   __be16 port)
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

#endif
