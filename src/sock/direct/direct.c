// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode: the protocol engine and udpd's port in the application's
 * own threads (direct.h). One lock serialises the engine, the port and
 * the sockets' receive queues; the caller that holds it runs the engine
 * on whatever the port has, so a receive that spins is the poller.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/iface.h"
#include "sock/direct/direct.h"
#include "sock/lib/busy.h"
#include "sock/lib/pmtu.h"
#include "sock/stack/stack.h"
#include "sock/udpd/port.h"

#define QLEN 256 /* datagrams queued per socket before drops */
#define MAX_FD 65536
#define EPH_LO 32768u
#define EPH_HI 60999u
/* A blocking call's spin unless $VZ_BUSY_POLL_US says otherwise. Waking
 * from poll() on an AF_XDP socket took ~50 us here (veth, copy mode): with
 * a spin shorter than that, two ping-ponging ends fall into sleeping on
 * every round trip and stay there (~100 us RTT, seen in the lab); 200 us
 * keeps them spinning. */
#define DEFAULT_BUSY_US 200
#define IDLE_NS 1000000 /* the background thread runs the engine after */

struct dgram {
	__be32 addr;
	__be16 port;
	size_t len;
	unsigned char data[];
};

struct dsock {
	int fd;
	bool nonblock;
	__be32 ip, peer_ip;
	__be16 port, peer_port; /* network order; 0: unbound/unconnected */
	__u32 busy_us;
	struct timeval rcvtimeo;
	struct dgram *q[QLEN];
	unsigned int head, tail; /* free-running */
	__u64 drops;
};

static struct {
	pthread_mutex_t lock;
	struct vz_udpd_port *port;
	struct vz_stack *stack;
	struct dsock *by_port[65536]; /* host order */
	struct dsock *by_fd[MAX_FD];
	int xfds[VZ_UDPD_MAX_QUEUES];
	unsigned int nxfds;
	__u64 last_run, last_tick;
	__u32 eph_next;
	__be32 ip4;
	pthread_t bg;
	volatile int stop;
	int init_err; /* positive errno once init failed */
	bool ready;
} D = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread bool in_burst;

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static int fail(int rc)
{
	errno = rc;
	return -1;
}

bool vz_direct_enabled(void)
{
	static int on = -1;

	if (on < 0) {
		const char *m = getenv("VZ_MODE");

		on = m && !strcmp(m, "direct");
	}
	return on;
}

bool vz_direct_fd(int fd)
{
	return fd >= 0 && fd < MAX_FD &&
	       __atomic_load_n(&D.by_fd[fd], __ATOMIC_ACQUIRE);
}

static struct dsock *get(int fd)
{
	struct dsock *s = fd >= 0 && fd < MAX_FD ? D.by_fd[fd] : NULL;

	if (!s)
		errno = EBADF;
	return s;
}

/* ---- the engine ---- */

static int on_tx(void *opaque, const void *frame, size_t len)
{
	(void)opaque;
	return vz_udpd_port_tx(D.port, frame, len);
}

/* A datagram for us: onto its socket's queue (as the kernel, a connected
 * socket takes only its peer's). */
static int on_deliver(void *opaque, const struct vz_dgram_meta *m,
		      const void *payload, size_t len)
{
	struct dsock *s = D.by_port[ntohs(m->dst_port)];
	struct dgram *d;

	(void)opaque;
	if (!s || (s->ip && s->ip != m->dst_ip))
		return -1;
	if (s->peer_port &&
	    (s->peer_ip != m->src_ip || s->peer_port != m->src_port))
		return 0; /* not from the peer: dropped, as the kernel does */
	if (s->tail - s->head >= QLEN) {
		s->drops++;
		return 0;
	}
	d = malloc(sizeof(*d) + len);
	if (!d) {
		s->drops++;
		return 0;
	}
	d->addr = m->src_ip;
	d->port = m->src_port;
	d->len = len;
	memcpy(d->data, payload, len);
	s->q[s->tail++ % QLEN] = d;
	return 0;
}

static void on_frame(void *opaque, const void *frame, size_t len)
{
	(void)opaque;
	vz_stack_input(D.stack, frame, len, now_ns());
}

/* Under D.lock: take what the port has, run the timers, send. */
static unsigned int engine(void)
{
	__u64 now = now_ns();
	unsigned int n = vz_udpd_port_rx(D.port, on_frame, NULL, 64);

	if (now - D.last_tick >= 1000000) {
		vz_stack_tick(D.stack, now);
		D.last_tick = now;
	}
	vz_udpd_port_flush(D.port);
	__atomic_store_n(&D.last_run, now, __ATOMIC_RELAXED);
	return n;
}

/* ARP, ICMP and the timers while the application is elsewhere: a turn
 * whenever nobody ran the engine for IDLE_NS. */
static void *background(void *arg)
{
	struct timespec ts = { 0, IDLE_NS };

	(void)arg;
	while (!D.stop) {
		nanosleep(&ts, NULL);
		if (now_ns() - __atomic_load_n(&D.last_run, __ATOMIC_RELAXED) <
		    IDLE_NS)
			continue;
		if (pthread_mutex_trylock(&D.lock))
			continue;
		engine();
		pthread_mutex_unlock(&D.lock);
	}
	return NULL;
}

static void shutdown_all(void)
{
	int i;

	if (!D.ready)
		return;
	D.stop = 1;
	pthread_join(D.bg, NULL);
	pthread_mutex_lock(&D.lock);
	vz_udpd_port_close(D.port); /* detaches the steering program */
	D.port = NULL;
	vz_stack_free(D.stack);
	D.stack = NULL;
	for (i = 0; i < MAX_FD; i++) {
		struct dsock *s = D.by_fd[i];

		if (!s)
			continue;
		while (s->head != s->tail)
			free(s->q[s->head++ % QLEN]);
		D.by_fd[i] = NULL;
		free(s);
	}
	D.ready = false;
	pthread_mutex_unlock(&D.lock);
}

/* The steering object: $VZ_DIRECT_STEER, else udpd's beside this library
 * in the build tree (src/sock/lib/ -> src/sock/udpd/). */
static const char *steer_path(char *buf, size_t len)
{
	const char *env = getenv("VZ_DIRECT_STEER");
	Dl_info info;
	char tmp[PATH_MAX];

	if (env && *env)
		return env;
	if (!dladdr((void *)vz_direct_init, &info) || !info.dli_fname)
		return NULL;
	snprintf(tmp, sizeof(tmp), "%s", info.dli_fname);
	snprintf(buf, len, "%s/../udpd/udpd_steer.bpf.o", dirname(tmp));
	return buf;
}

static int parse_addr(const char *text, __be32 *ip, __u8 *prefix)
{
	char buf[32], *slash, *end;
	long p;

	if (!text || strlen(text) >= sizeof(buf))
		return -1;
	memcpy(buf, text, strlen(text) + 1);
	slash = strchr(buf, '/');
	if (!slash)
		return -1;
	*slash = 0;
	p = strtol(slash + 1, &end, 10);
	if (*end || p < 1 || p > 32 || inet_pton(AF_INET, buf, ip) != 1)
		return -1;
	*prefix = (__u8)p;
	return 0;
}

static void do_init(void)
{
	struct vz_stack_config cfg = { 0 };
	struct vz_stack_ops ops = { .tx = on_tx, .deliver = on_deliver };
	struct vz_udpd_port_config pcfg = { 0 };
	const char *ifname = getenv("VZ_DIRECT_IFACE");
	const char *addr = getenv("VZ_DIRECT_ADDR");
	const char *gw = getenv("VZ_DIRECT_GATEWAY");
	const char *skb = getenv("VZ_DIRECT_SKB");
	char steer[PATH_MAX + 32], err[256] = "";

	if (!ifname || !*ifname ||
	    parse_addr(addr, &cfg.ip4, &cfg.prefix_len)) {
		fprintf(stderr,
			"libveloz-sock: VZ_MODE=direct needs "
			"VZ_DIRECT_IFACE=IF and VZ_DIRECT_ADDR=A.B.C.D/LEN\n");
		D.init_err = EINVAL;
		return;
	}
	if (gw && *gw && inet_pton(AF_INET, gw, &cfg.gateway) != 1) {
		fprintf(stderr,
			"libveloz-sock: VZ_DIRECT_GATEWAY=%s is not an "
			"IPv4 address\n",
			gw);
		D.init_err = EINVAL;
		return;
	}
	if (vz_iface_mac(ifname, cfg.mac)) {
		fprintf(stderr, "libveloz-sock: no interface %s\n", ifname);
		D.init_err = ENODEV;
		return;
	}
	vz_quiet_bpf_logs(); /* libxdp's dispatcher notices: debugging only */
	D.stack = vz_stack_new(&cfg, &ops, err, sizeof(err));
	if (!D.stack) {
		fprintf(stderr, "libveloz-sock: %s\n", err);
		D.init_err = EINVAL;
		return;
	}
	pcfg = (struct vz_udpd_port_config){
		.ifname = ifname,
		.ip4 = cfg.ip4,
		.skb_mode = skb && !strcmp(skb, "1"),
		/* the interface lock is free: what is attached is a killed
		 * owner's, safe to remove (a live one's is refused) */
		.replace = true,
		.steer_path = steer_path(steer, sizeof(steer)),
	};
	D.port = vz_udpd_port_open(&pcfg);
	if (!D.port) {
		vz_stack_free(D.stack);
		D.stack = NULL;
		D.init_err = EIO;
		return;
	}
	D.ip4 = cfg.ip4;
	D.nxfds = vz_udpd_port_fds(D.port, D.xfds, VZ_UDPD_MAX_QUEUES);
	D.eph_next = (__u32)getpid();
	if (pthread_create(&D.bg, NULL, background, NULL)) {
		vz_udpd_port_close(D.port);
		vz_stack_free(D.stack);
		D.init_err = EAGAIN;
		return;
	}
	D.ready = true;
	atexit(shutdown_all);
}

int vz_direct_init(void)
{
	pthread_once(&init_once, do_init);
	return D.init_err ? fail(D.init_err) : 0;
}

/* ---- sockets ---- */

int vz_direct_socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct dsock *s;

	if (vz_direct_init())
		return -1;
	if (domain != AF_INET)
		return fail(EAFNOSUPPORT);
	if (base != SOCK_DGRAM)
		return fail(base == SOCK_STREAM ? EPROTONOSUPPORT
						: ESOCKTNOSUPPORT);
	if (protocol && protocol != IPPROTO_UDP)
		return fail(EPROTONOSUPPORT);
	s = calloc(1, sizeof(*s));
	if (!s)
		return fail(ENOMEM);
	/* a real descriptor, so numbers never collide with the process's */
	s->fd = eventfd(0,
			EFD_NONBLOCK | (type & SOCK_CLOEXEC ? EFD_CLOEXEC : 0));
	if (s->fd < 0 || s->fd >= MAX_FD) {
		int e = s->fd < 0 ? errno : EMFILE;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return fail(e);
	}
	s->nonblock = type & SOCK_NONBLOCK;
	s->busy_us = getenv("VZ_BUSY_POLL_US") ? vz_busy_default_us()
					       : DEFAULT_BUSY_US;
	pthread_mutex_lock(&D.lock);
	__atomic_store_n(&D.by_fd[s->fd], s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&D.lock);
	return s->fd;
}

int vz_direct_close(int fd)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	pthread_mutex_lock(&D.lock);
	if (s->port && D.by_port[ntohs(s->port)] == s)
		D.by_port[ntohs(s->port)] = NULL;
	__atomic_store_n(&D.by_fd[fd], NULL, __ATOMIC_RELEASE);
	while (s->head != s->tail)
		free(s->q[s->head++ % QLEN]);
	pthread_mutex_unlock(&D.lock);
	close(fd);
	free(s);
	return 0;
}

static int sin_get(const struct sockaddr *sa, socklen_t len,
		   struct sockaddr_in *sin)
{
	if (!sa)
		return EFAULT;
	if (len < sizeof(*sin))
		return EINVAL;
	memcpy(sin, sa, sizeof(*sin));
	return sin->sin_family == AF_INET ? 0 : EAFNOSUPPORT;
}

static int sin_put(struct sockaddr *sa, socklen_t *len, __be32 ip, __be16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = port };

	if (!sa || !len)
		return fail(EFAULT);
	memcpy(sa, &sin, *len < sizeof(sin) ? *len : sizeof(sin));
	*len = sizeof(sin);
	return 0;
}

/* Under D.lock. One socket per port: no SO_REUSEPORT groups here. */
static int bind_locked(struct dsock *s, __be32 ip, __u16 port)
{
	unsigned int i;

	if (s->port)
		return EINVAL;
	if (ip && ip != D.ip4)
		return EADDRNOTAVAIL;
	if (!port) {
		for (i = 0; i <= EPH_HI - EPH_LO; i++) {
			__u16 p = (__u16)(EPH_LO +
					  D.eph_next++ % (EPH_HI - EPH_LO + 1));

			if (!D.by_port[p]) {
				port = p;
				break;
			}
		}
		if (!port)
			return EADDRINUSE;
	} else if (D.by_port[port]) {
		return EADDRINUSE;
	}
	s->ip = ip;
	s->port = htons(port);
	D.by_port[port] = s;
	return 0;
}

int vz_direct_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct dsock *s = get(fd);
	struct sockaddr_in sin;
	int rc;

	if (!s)
		return -1;
	rc = sin_get(addr, len, &sin);
	if (rc)
		return fail(rc);
	pthread_mutex_lock(&D.lock);
	rc = bind_locked(s, sin.sin_addr.s_addr, ntohs(sin.sin_port));
	pthread_mutex_unlock(&D.lock);
	return rc ? fail(rc) : 0;
}

int vz_direct_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct dsock *s = get(fd);
	struct sockaddr_in sin;
	int rc = 0;

	if (!s)
		return -1;
	if (addr && len >= sizeof(sa_family_t) &&
	    addr->sa_family == AF_UNSPEC) {
		s->peer_ip = 0;
		s->peer_port = 0;
		return 0;
	}
	rc = sin_get(addr, len, &sin);
	if (rc)
		return fail(rc);
	if (!sin.sin_port)
		return fail(EINVAL);
	pthread_mutex_lock(&D.lock);
	if (!s->port)
		rc = bind_locked(s, 0, 0);
	if (!rc) {
		s->peer_ip = sin.sin_addr.s_addr;
		s->peer_port = sin.sin_port;
	}
	pthread_mutex_unlock(&D.lock);
	return rc ? fail(rc) : 0;
}

int vz_direct_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	return sin_put(addr, len, s->ip || !s->peer_port ? s->ip : D.ip4,
		       s->port);
}

int vz_direct_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	if (!s->peer_port)
		return fail(ENOTCONN);
	return sin_put(addr, len, s->peer_ip, s->peer_port);
}

/* ---- datagrams ---- */

ssize_t vz_direct_sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *to, socklen_t tolen)
{
	struct dsock *s = get(fd);
	struct vz_dgram_meta m = { 0 };
	struct sockaddr_in sin;
	int rc = 0;

	if (!s)
		return -1;
	if (flags & MSG_OOB)
		return fail(EOPNOTSUPP);
	if (len > VZ_STACK_MAX_UDP)
		return fail(EMSGSIZE);
	if (len && !buf)
		return fail(EFAULT);
	if (to) {
		rc = sin_get(to, tolen, &sin);
		if (rc)
			return fail(rc);
		if (!sin.sin_port)
			return fail(EINVAL);
	} else if (!s->peer_port) {
		return fail(EDESTADDRREQ);
	} else {
		sin.sin_addr.s_addr = s->peer_ip;
		sin.sin_port = s->peer_port;
	}
	pthread_mutex_lock(&D.lock);
	if (!s->port)
		rc = -bind_locked(s, 0, 0);
	if (!rc) {
		m.src_ip = s->ip;
		m.src_port = s->port;
		m.dst_ip = sin.sin_addr.s_addr;
		m.dst_port = sin.sin_port;
		rc = vz_stack_send(D.stack, &m, buf, len, now_ns());
		/* run to completion: out now, and take what came meanwhile
		 * (a burst kicks once, at its end) */
		if (!in_burst)
			engine();
	}
	pthread_mutex_unlock(&D.lock);
	return rc ? fail(-rc) : (ssize_t)len;
}

void vz_direct_burst(bool begin)
{
	in_burst = begin;
	if (begin || !D.ready)
		return;
	pthread_mutex_lock(&D.lock);
	engine();
	pthread_mutex_unlock(&D.lock);
}

/* Under D.lock: the oldest datagram, or NULL. */
static struct dgram *pop(struct dsock *s, bool peek)
{
	struct dgram *d;

	if (s->head == s->tail)
		return NULL;
	d = s->q[s->head % QLEN];
	if (!peek)
		s->head++;
	return d;
}

static bool readable(const struct dsock *s)
{
	return __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&s->head, __ATOMIC_RELAXED);
}

/* A turn of the engine unless another thread is at it; readable after? */
static bool turn(const void *arg)
{
	const struct dsock *s = arg;

	if (readable(s))
		return true;
	if (!pthread_mutex_trylock(&D.lock)) {
		engine();
		pthread_mutex_unlock(&D.lock);
	}
	return readable(s);
}

/* Sleep on the AF_XDP sockets (and any kernel descriptors) at most `ms`. */
static int sleep_port(struct pollfd *extra, nfds_t nextra, int ms)
{
	struct pollfd p[VZ_UDPD_MAX_QUEUES + 64];
	nfds_t i, n = 0;
	int rc;

	for (i = 0; i < D.nxfds; i++)
		p[n++] = (struct pollfd){ .fd = D.xfds[i], .events = POLLIN };
	for (i = 0; i < nextra && n < sizeof(p) / sizeof(p[0]); i++)
		p[n++] = extra[i];
	rc = poll(p, n, ms);
	for (i = 0; i < nextra && D.nxfds + i < n; i++)
		extra[i].revents = p[D.nxfds + i].revents;
	return rc;
}

static __s64 deadline_of(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	return (__s64)now_ns() + (__s64)tv->tv_sec * 1000000000 +
	       (__s64)tv->tv_usec * 1000;
}

ssize_t vz_direct_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *from, socklen_t *fromlen)
{
	struct dsock *s = get(fd);
	__s64 until = -2;
	struct dgram *d;
	size_t n;

	if (!s)
		return -1;
	if (flags & (MSG_OOB | MSG_ERRQUEUE))
		return fail(EOPNOTSUPP);
	if (len && !buf)
		return fail(EFAULT);
	for (;;) {
		pthread_mutex_lock(&D.lock);
		d = pop(s, flags & MSG_PEEK);
		if (!d) {
			engine();
			d = pop(s, flags & MSG_PEEK);
		}
		pthread_mutex_unlock(&D.lock);
		if (d)
			break;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return fail(EAGAIN);
		if (until == -2)
			until = deadline_of(&s->rcvtimeo);
		if (vz_busy_spin(turn, s, s->busy_us, until))
			continue;
		if (until >= 0 && (__s64)now_ns() >= until)
			return fail(EAGAIN);
		/* a frame wakes us; 1 ms bounds the wait for the timers */
		sleep_port(NULL, 0, 1);
	}
	n = d->len < len ? d->len : len;
	if (n)
		memcpy(buf, d->data, n);
	if (from && fromlen)
		sin_put(from, fromlen, d->addr, d->port);
	len = d->len;
	if (!(flags & MSG_PEEK))
		free(d);
	return (ssize_t)((flags & MSG_TRUNC) ? len : n);
}

/* ---- options, poll ---- */

int vz_direct_setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct dsock *s = get(fd);
	int v;

	if (!s)
		return -1;
	if (vz_pmtu_opt(false, level, name)) {
		int err = vz_pmtu_set(val, len);

		return err ? fail(-err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(ENOPROTOOPT);
	if (!val)
		return fail(EFAULT);
	if (name == SO_RCVTIMEO || name == SO_SNDTIMEO) {
		struct timeval t;

		if (len < sizeof(t))
			return fail(EINVAL);
		memcpy(&t, val, sizeof(t));
		if (t.tv_usec < 0 || t.tv_usec >= 1000000)
			return fail(EDOM);
		if (name == SO_RCVTIMEO)
			s->rcvtimeo = t;
		return 0; /* a send never waits here */
	}
	if (len < sizeof(int))
		return fail(EINVAL);
	memcpy(&v, val, sizeof(v));
	switch (name) {
	case SO_BUSY_POLL:
		if (v < 0 || (__u32)v > VZ_BUSY_POLL_MAX_US)
			return fail(EINVAL);
		s->busy_us = (__u32)v;
		return 0;
	case SO_REUSEADDR:
	case SO_REUSEPORT: /* knotd sets it even for one worker */
	case SO_RCVBUF:
	case SO_SNDBUF:
		/* accepted; one socket per port here: a second bind to a
		 * port, SO_REUSEPORT or not, is EADDRINUSE */
		return 0;
	default:
		return fail(ENOPROTOOPT);
	}
}

static int put_int(void *val, socklen_t *len, int v)
{
	if (*len < sizeof(int))
		return fail(EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

int vz_direct_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	if (vz_pmtu_opt(false, level, name)) {
		int err = vz_pmtu_get(val, len);

		return err ? fail(-err) : 0;
	}
	if (level != SOL_SOCKET)
		return fail(ENOPROTOOPT);
	if (!val || !len)
		return fail(EFAULT);
	switch (name) {
	case SO_BUSY_POLL:
		return put_int(val, len, (int)s->busy_us);
	case SO_TYPE:
		return put_int(val, len, SOCK_DGRAM);
	case SO_DOMAIN:
		return put_int(val, len, AF_INET);
	case SO_PROTOCOL:
		return put_int(val, len, IPPROTO_UDP);
	case SO_ERROR:
		return put_int(val, len, 0);
	case SO_RCVBUF:
	case SO_SNDBUF:
		return put_int(val, len, QLEN * 2048);
	default:
		return fail(ENOPROTOOPT);
	}
}

int vz_direct_fcntl(int fd, int cmd, int arg)
{
	struct dsock *s = get(fd);

	if (!s)
		return -1;
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		s->nonblock = arg & O_NONBLOCK;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return fcntl(fd, cmd, arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return fail(EOPNOTSUPP); /* no copies of a direct socket */
	default:
		return fail(EINVAL);
	}
}

static int poll_ready(struct pollfd *fds, nfds_t n)
{
	int ready = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		struct dsock *s =
			vz_direct_fd(fds[i].fd) ? D.by_fd[fds[i].fd] : NULL;

		if (!s)
			continue;
		fds[i].revents = (short)(fds[i].events & POLLOUT);
		if ((fds[i].events & POLLIN) && readable(s))
			fds[i].revents |= POLLIN;
		ready += fds[i].revents != 0;
	}
	return ready;
}

struct poll_arg {
	struct pollfd *fds;
	nfds_t n;
};

static bool poll_turn(const void *arg)
{
	const struct poll_arg *p = arg;

	if (!pthread_mutex_trylock(&D.lock)) {
		engine();
		pthread_mutex_unlock(&D.lock);
	}
	return poll_ready(p->fds, p->n) > 0;
}

/*
 * Direct sockets are ready when their queue is; kernel descriptors are
 * asked with a zero timeout each turn, and waited on with the AF_XDP
 * sockets when the spin is over.
 */
int vz_direct_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	__s64 until = timeout_ms < 0
			      ? -1
			      : (__s64)now_ns() + (__s64)timeout_ms * 1000000;
	struct pollfd k[64];
	nfds_t i, nk = 0, map[64];
	struct poll_arg pa = { fds, n };
	__u32 busy = DEFAULT_BUSY_US;
	int ready;

	for (i = 0; i < n; i++) {
		fds[i].revents = 0;
		if (vz_direct_fd(fds[i].fd)) {
			busy = D.by_fd[fds[i].fd]->busy_us;
			continue;
		}
		if (nk == 64)
			return fail(EINVAL);
		map[nk] = i;
		k[nk] = fds[i];
		k[nk++].revents = 0;
	}
	for (;;) {
		int kr = nk ? poll(k, nk, 0) : 0;

		if (kr < 0)
			return -1;
		ready = poll_ready(fds, n);
		for (i = 0; i < nk; i++) {
			fds[map[i]].revents = k[i].revents;
			ready += k[i].revents != 0;
		}
		if (ready || (until >= 0 && (__s64)now_ns() >= until))
			return ready;
		if (vz_busy_spin(poll_turn, &pa, busy, until))
			continue;
		sleep_port(k, nk, 1);
	}
}
