// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-preload: LD_PRELOAD=libveloz-preload.so runs an unmodified
 * program's AF_INET and AF_INET6 datagram sockets on veloz's userspace
 * stack (AF_INET6 only when the poller has an IPv6 address). Every other
 * socket, and every call on a descriptor that is not a veloz socket, falls
 * through to libc.
 *
 * This file: the state (libc's calls, the link to the poller) and the
 * calls that create, name and close sockets (copies and epoll in
 * preload_epoll.c). Across fork() libveloz-sock
 * itself gives the child a clean slate: the parent's veloz descriptors are
 * closed in the child, whose own UDP sockets get their own link.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

struct vz_libc vz_libc;
__thread int vz_pl_depth;

/* Set once a veloz socket may exist: until then nothing calls the library,
 * so programs that never open a UDP socket pay nothing. */
static atomic_bool vz_pl_active;
static bool vz_pl_strict;
static int vz_pl_init_errno; /* why the poller was unreachable */
static pthread_key_t vz_pl_bounce_key;
static __thread char *vz_pl_bounce_buf;

#define VZ_PL_SYM(field, name) \
	vz_libc.field = (__typeof__(vz_libc.field))dlsym(RTLD_NEXT, name)

static void vz_pl_resolve_all(void)
{
	VZ_PL_SYM(socket, "socket");
	VZ_PL_SYM(bind, "bind");
	VZ_PL_SYM(connect, "connect");
	VZ_PL_SYM(sendto, "sendto");
	VZ_PL_SYM(sendmsg, "sendmsg");
	VZ_PL_SYM(sendmmsg, "sendmmsg");
	VZ_PL_SYM(recvfrom, "recvfrom");
	VZ_PL_SYM(recvmsg, "recvmsg");
	VZ_PL_SYM(recvmmsg, "recvmmsg");
	VZ_PL_SYM(send, "send");
	VZ_PL_SYM(recv, "recv");
	VZ_PL_SYM(read, "read");
	VZ_PL_SYM(write, "write");
	VZ_PL_SYM(readv, "readv");
	VZ_PL_SYM(writev, "writev");
	VZ_PL_SYM(close, "close");
	VZ_PL_SYM(shutdown, "shutdown");
	VZ_PL_SYM(getsockname, "getsockname");
	VZ_PL_SYM(getpeername, "getpeername");
	VZ_PL_SYM(getsockopt, "getsockopt");
	VZ_PL_SYM(setsockopt, "setsockopt");
	VZ_PL_SYM(fcntl, "fcntl");
	VZ_PL_SYM(fcntl64, "fcntl64");
	VZ_PL_SYM(ioctl, "ioctl");
	VZ_PL_SYM(dup, "dup");
	VZ_PL_SYM(dup2, "dup2");
	VZ_PL_SYM(dup3, "dup3");
	VZ_PL_SYM(poll, "poll");
	VZ_PL_SYM(ppoll, "ppoll");
	VZ_PL_SYM(select, "select");
	VZ_PL_SYM(pselect, "pselect");
	VZ_PL_SYM(epoll_ctl, "epoll_ctl");
	VZ_PL_SYM(recv_chk, "__recv_chk");
	VZ_PL_SYM(recvfrom_chk, "__recvfrom_chk");
	VZ_PL_SYM(read_chk, "__read_chk");
	VZ_PL_SYM(poll_chk, "__poll_chk");
	VZ_PL_SYM(ppoll_chk, "__ppoll_chk");
	/* glibc before 2.28 has no fcntl64; fcntl is the same call there */
	if (!vz_libc.fcntl64)
		vz_libc.fcntl64 = vz_libc.fcntl;
}

static pthread_once_t vz_pl_resolve_once = PTHREAD_ONCE_INIT;

/* Another library's constructor may call us before ours runs. */
void vz_pl_resolve(void)
{
	pthread_once(&vz_pl_resolve_once, vz_pl_resolve_all);
}

void vz_pl_warn_once(int *flag, const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	char line[256];
	va_list ap;
	int n;

	pthread_mutex_lock(&lock);
	if (*flag) {
		pthread_mutex_unlock(&lock);
		return;
	}
	*flag = 1;
	pthread_mutex_unlock(&lock);
	n = snprintf(line, sizeof(line), "veloz-preload: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* not stdio: the program may be using stderr's buffer right now */
	if (VZ_LIBC(write)(STDERR_FILENO, line, n) < 0)
		return;
}

static void vz_pl_free_bounce(void *buf)
{
	free(buf);
}

__attribute__((constructor)) static void vz_pl_constructor(void)
{
	const char *strict = getenv("VZ_PRELOAD_STRICT");

	vz_pl_resolve();
	vz_pl_strict = strict && strcmp(strict, "0") && *strict;
	pthread_key_create(&vz_pl_bounce_key, vz_pl_free_bounce);
}

char *vz_pl_bounce(void)
{
	if (!vz_pl_bounce_buf) {
		vz_pl_bounce_buf = malloc(VZ_PL_BOUNCE);
		if (!vz_pl_bounce_buf) {
			errno = ENOMEM;
			return NULL;
		}
		pthread_setspecific(vz_pl_bounce_key, vz_pl_bounce_buf);
	}
	return vz_pl_bounce_buf;
}

bool vz_pl_active_now(void)
{
	return !vz_pl_depth && atomic_load(&vz_pl_active);
}

bool vz_pl_veloz(int fd)
{
	if (vz_pl_depth || fd < 0 || !atomic_load(&vz_pl_active))
		return false;
	return VZ_CALL(vz_is_socket(fd));
}

static const char *vz_pl_path(void)
{
	const char *path = getenv("VZ_UDPD_SOCKET");

	return path && *path ? path : VZ_UDPD_DEFAULT_SOCKET;
}

static pthread_once_t vz_pl_init_once = PTHREAD_ONCE_INIT;

static void vz_pl_connect(void)
{
	static int warned;

	if (VZ_CALL(vz_sock_init(NULL)) == 0) {
		atomic_store(&vz_pl_active, true);
		return;
	}
	vz_pl_init_errno = errno ? errno : EIO;
	vz_pl_warn_once(&warned, "no poller at %s (%s): %s", vz_pl_path(),
			strerror(vz_pl_init_errno),
			vz_pl_strict ? "UDP sockets fail (VZ_PRELOAD_STRICT=1)"
				     : "UDP sockets use the kernel");
}

static bool vz_pl_is_udp(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_DGRAM &&
	       (protocol == 0 || protocol == IPPROTO_UDP);
}

int socket(int domain, int type, int protocol)
{
	int fd;

	if (vz_pl_depth || !vz_pl_is_udp(domain, type, protocol))
		return VZ_LIBC(socket)(domain, type, protocol);
	pthread_once(&vz_pl_init_once, vz_pl_connect);
	if (vz_pl_init_errno) {
		if (!vz_pl_strict)
			return VZ_LIBC(socket)(domain, type, protocol);
		errno = vz_pl_init_errno;
		return -1;
	}
	fd = VZ_CALL(vz_socket(domain, type, protocol));
	/* A poller without an IPv6 address: IPv6 stays the kernel's. */
	if (fd < 0 && errno == EAFNOSUPPORT && domain == AF_INET6)
		return VZ_LIBC(socket)(domain, type, protocol);
	return fd;
}

/*
 * glibc declares the address arguments as a transparent union under
 * _GNU_SOURCE; these take it apart.
 */
#define VZ_SA(a) ((a).__sockaddr__)

int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_bind(fd, VZ_SA(addr), len));
	return VZ_LIBC(bind)(fd, VZ_SA(addr), len);
}

int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_connect(fd, VZ_SA(addr), len));
	return VZ_LIBC(connect)(fd, VZ_SA(addr), len);
}

int close(int fd)
{
	if (vz_pl_veloz(fd) || vz_pl_epoll(fd))
		return VZ_CALL(vz_close(fd));
	return VZ_LIBC(close)(fd);
}

/* UDP shutdown() is rare; libveloz-sock has none. */
int shutdown(int fd, int how)
{
	if (vz_pl_veloz(fd)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return VZ_LIBC(shutdown)(fd, how);
}

int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_getsockname(fd, VZ_SA(addr), len));
	return VZ_LIBC(getsockname)(fd, VZ_SA(addr), len);
}

int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_getpeername(fd, VZ_SA(addr), len));
	return VZ_LIBC(getpeername)(fd, VZ_SA(addr), len);
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_getsockopt(fd, level, name, val, len));
	return VZ_LIBC(getsockopt)(fd, level, name, val, len);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (vz_pl_veloz(fd))
		return VZ_CALL(vz_setsockopt(fd, level, name, val, len));
	return VZ_LIBC(setsockopt)(fd, level, name, val, len);
}
