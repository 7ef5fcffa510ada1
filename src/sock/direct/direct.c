// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode: the protocol engines and udpd's port in the application's
 * own threads (direct.h), an engine per queue of the interface. The
 * caller that holds an engine's lock runs it on whatever its queue has, so
 * a receive that spins is the poller. direct_internal.h says which file
 * holds what and how the locks nest; this one: set-up, which engines a
 * thread uses, and the data path (sendto, recvfrom).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/iface.h"
#include "sock/direct/direct.h"
#include "sock/direct/direct_internal.h"
#include "sock/app/busy.h"
#include "sock/app/pmtu.h"
#include "sock/stack/stack.h"
#include "sock/port/port.h"

struct vz_direct_state vz_direct = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread bool in_burst;
/* Engines this thread's burst left frames queued on. */
static __thread __u32 burst_engines;
/* The queues of the datagrams this thread received (a bit each), and the
 * last one's plus one (0: none yet). */
static __thread __u32 my_queues;
static __thread unsigned int last_queue;

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
	       __atomic_load_n(&vz_direct.by_fd[fd], __ATOMIC_ACQUIRE);
}

/* ---- which engines a thread uses ---- */

__u32 vz_direct_all_engines(void)
{
	unsigned int n = vz_direct.nengines;

	return n >= 32 ? ~0u : (1u << n) - 1;
}

__u32 vz_direct_my_engines(void)
{
	__u32 all = vz_direct_all_engines();

	return my_queues & all ? my_queues & all : all;
}

/* The engine a send from s goes out on: the one of the queue the thread's
 * last datagram came on (an answer leaves on its request's queue), else
 * one chosen by the socket, so a client's sockets spread over the queues. */
static struct vz_direct_engine *send_engine(const struct vz_direct_socket *s)
{
	unsigned int n = vz_direct.nengines;

	if (last_queue && last_queue <= n)
		return &vz_direct.engines[last_queue - 1];
	return &vz_direct.engines[(unsigned int)s->fd % n];
}

static void shutdown_all(void)
{
	unsigned int e;
	int i;

	if (!vz_direct.ready) /* or a forked child: the port is the parent's */
		return;
	vz_direct_bg_stop();
	for (e = 0; e < vz_direct.nengines; e++)
		pthread_mutex_lock(&vz_direct.engines[e].lock);
	pthread_mutex_lock(&vz_direct.lock);
	vz_udpd_port_close(vz_direct.port); /* detaches the steering program */
	vz_direct.port = NULL;
	vz_direct_engines_free();
	for (i = 0; i < MAX_FD; i++) {
		struct vz_direct_socket *s = vz_direct.by_fd[i];

		if (!s)
			continue;
		vz_direct.by_fd[i] = NULL;
		if (--s->refs || s->users)
			continue; /* another copy, or a call still holds it */
		while (s->head != s->tail)
			free(s->q[s->head++ % QLEN]);
		free(s);
	}
	vz_direct.ready = false;
	pthread_mutex_unlock(&vz_direct.lock);
	for (e = vz_direct.nengines; e-- > 0;)
		pthread_mutex_unlock(&vz_direct.engines[e].lock);
}

/* The steering object: $VZ_DIRECT_STEER, else udpd's beside this library
 * in the build tree (src/sock/app/ -> src/sock/udpd/). */
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

/* ADDR/LEN, or ADDR alone when prefix is NULL (the stack judges them). */
static int parse_addr6(const char *text, __u8 ip[16], __u8 *prefix)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	long p = 0;

	if (!text || strlen(text) >= sizeof(buf))
		return -1;
	memcpy(buf, text, strlen(text) + 1);
	slash = strchr(buf, '/');
	if (!slash != !prefix)
		return -1;
	if (slash) {
		*slash = 0;
		p = strtol(slash + 1, &end, 10);
		if (*end || p < 1 || p > 128)
			return -1;
		*prefix = (__u8)p;
	}
	return inet_pton(AF_INET6, buf, ip) == 1 ? 0 : -1;
}

/* Linux's default for IPV6_V6ONLY, net.ipv6.bindv6only (0 if unreadable). */
static bool bindv6only(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v != 0;
}

/* VZ_DIRECT_ADDR6, VZ_DIRECT_GATEWAY6: 0, or -1 with a line on stderr. */
static int config6(struct vz_stack_config *cfg)
{
	const char *addr = getenv("VZ_DIRECT_ADDR6");
	const char *gw = getenv("VZ_DIRECT_GATEWAY6");

	if (addr && *addr && parse_addr6(addr, cfg->ip6, &cfg->prefix6_len)) {
		fprintf(stderr,
			"libveloz-sock: VZ_DIRECT_ADDR6=%s: give an "
			"IPv6 address with its prefix, as "
			"fd00:198:18::3/64\n",
			addr);
		return -1;
	}
	if (gw && *gw &&
	    (!cfg->prefix6_len || parse_addr6(gw, cfg->gateway6, NULL))) {
		fprintf(stderr, "libveloz-sock: VZ_DIRECT_GATEWAY6=%s: %s\n",
			gw,
			cfg->prefix6_len ? "not an IPv6 address"
					 : "needs VZ_DIRECT_ADDR6");
		return -1;
	}
	return 0;
}

/* The stack's addresses from the environment: 0, or -1 with a line on
 * stderr. */
static int config(struct vz_stack_config *cfg, const char *ifname)
{
	const char *addr = getenv("VZ_DIRECT_ADDR");
	const char *gw = getenv("VZ_DIRECT_GATEWAY");

	if (!ifname || !*ifname ||
	    parse_addr(addr, &cfg->ip4, &cfg->prefix_len)) {
		fprintf(stderr,
			"libveloz-sock: VZ_MODE=direct needs "
			"VZ_DIRECT_IFACE=IF and VZ_DIRECT_ADDR=A.B.C.D/LEN\n");
		return -1;
	}
	if (gw && *gw && inet_pton(AF_INET, gw, &cfg->gateway) != 1) {
		fprintf(stderr,
			"libveloz-sock: VZ_DIRECT_GATEWAY=%s is not an "
			"IPv4 address\n",
			gw);
		return -1;
	}
	return config6(cfg);
}

/* The CPUs this process may run on. */
static int usable_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	return CPU_COUNT(&set);
}

static void do_init(void)
{
	struct vz_stack_config cfg = { 0 };
	struct vz_udpd_port_config pcfg = { 0 };
	const char *ifname = getenv("VZ_DIRECT_IFACE");
	const char *skb = getenv("VZ_DIRECT_SKB");
	char steer[PATH_MAX + 32], err[256] = "";

	if (config(&cfg, ifname)) {
		vz_direct.init_err = EINVAL;
		return;
	}
	if (vz_iface_mac(ifname, cfg.mac)) {
		fprintf(stderr, "libveloz-sock: no interface %s\n", ifname);
		vz_direct.init_err = ENODEV;
		return;
	}
	vz_quiet_bpf_logs(); /* libbpf's and libxdp's notices: debugging only */
	/* the addresses judged before anything is attached */
	if (!vz_direct_config_ok(&cfg, err, sizeof(err))) {
		fprintf(stderr, "libveloz-sock: %s\n", err);
		vz_direct.init_err = EINVAL;
		return;
	}
	pcfg = (struct vz_udpd_port_config){
		.ifname = ifname,
		.ip4 = cfg.ip4,
		.ip6 = cfg.prefix6_len ? cfg.ip6 : NULL,
		.skb_mode = skb && !strcmp(skb, "1"),
		/* the interface lock is free: a veloz program attached
		 * through netlink is a killed owner's, safe to remove (a
		 * live one's, or one on a BPF link, is refused) */
		.replace = true,
		.steer_path = steer_path(steer, sizeof(steer)),
	};
	vz_direct.port = vz_udpd_port_open(&pcfg);
	if (!vz_direct.port) {
		vz_direct.init_err = EIO;
		return;
	}
	vz_direct.ip4 = cfg.ip4;
	if (cfg.prefix6_len)
		memcpy(&vz_direct.ip6, cfg.ip6, sizeof(vz_direct.ip6));
	vz_direct.v6only = bindv6only();
	vz_direct.eph_next = (__u32)getpid();
	vz_direct.busy_us = getenv("VZ_BUSY_POLL_US") ? vz_busy_default_us()
						      : DEFAULT_BUSY_US;
	vz_direct.max_wait_spinners = usable_cpus() / 2 ? usable_cpus() / 2 : 1;
	vz_direct_atfork();
	if (vz_direct_engines_new(&cfg) || vz_direct_bg_start()) {
		vz_direct_bg_stop();
		for (unsigned int i = 0; i < vz_direct.nengines; i++)
			if (vz_direct.engines[i].wake >= 0)
				close(vz_direct.engines[i].wake);
		vz_udpd_port_close(vz_direct.port);
		vz_direct.port = NULL;
		vz_direct_engines_free();
		vz_direct.init_err = vz_direct.nengines ? EAGAIN : EIO;
		return;
	}
	vz_direct.ready = true;
	atexit(shutdown_all);
}

int vz_direct_init(void)
{
	pthread_once(&init_once, do_init);
	return vz_direct.init_err ? fail(vz_direct.init_err) : 0;
}

/* ---- datagrams ---- */

/* Under vz_direct.lock, s bound: the addresses of a datagram to ip (IPv4
 * v4-mapped) from s's address of that family: 0 or a negative errno. */
static int meta_locked(const struct vz_direct_socket *s,
		       const struct in6_addr *ip, __be16 port,
		       struct vz_dgram_meta *m)
{
	bool v4 = in6_mapped(ip);

	*m = (struct vz_dgram_meta){ .src_port = s->port, .dst_port = port };
	if (!(s->tables & (v4 ? ON4 : ON6)))
		return -ENETUNREACH; /* bound to the other family's address */
	if (v4) {
		m->src_ip = in6_any(&s->ip) ? 0 : in6_v4(&s->ip);
		m->dst_ip = in6_v4(ip);
	} else {
		m->v6 = 1;
		if (!in6_any(&s->ip))
			memcpy(m->src_ip6, &s->ip, 16);
		memcpy(m->dst_ip6, ip, 16);
	}
	return 0;
}

/* Out through engine e: run to completion, out now, and take what came
 * meanwhile (a burst kicks once, at its end). */
static int send_on(struct vz_direct_engine *e, const struct vz_dgram_meta *m,
		   const void *buf, size_t len)
{
	int rc;

	pthread_mutex_lock(&e->lock);
	rc = e->stack ? vz_stack_send(e->stack, m, buf, len, vz_now_ns())
		      : -ENETDOWN; /* the process is exiting */
	if (!rc && in_burst)
		burst_engines |= 1u << e->queue;
	else if (!rc)
		vz_direct_engine_run(e);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

static ssize_t sendto_on(struct vz_direct_socket *s, const void *buf,
			 size_t len, int flags, const struct sockaddr *to,
			 socklen_t tolen)
{
	struct vz_dgram_meta m;
	struct in6_addr ip;
	__be16 port;
	int rc = 0;

	if (flags & MSG_OOB)
		return fail(EOPNOTSUPP);
	if (len > VZ_STACK_MAX_UDP)
		return fail(EMSGSIZE);
	if (len && !buf)
		return fail(EFAULT);
	/* udpv6_sendmsg: AF_UNSPEC is no address at all */
	if (to && s->v6 && tolen >= sizeof(sa_family_t) &&
	    to->sa_family == AF_UNSPEC)
		to = NULL;
	if (to) {
		rc = vz_direct_addr_get(s, to, tolen, DS_SEND, &ip, &port);
		if (rc)
			return fail(rc);
		if (!port)
			return fail(EINVAL);
	} else if (!s->peer_port) {
		return fail(EDESTADDRREQ);
	} else {
		ip = s->peer_ip;
		port = s->peer_port;
	}
	pthread_mutex_lock(&vz_direct.lock);
	if (!vz_direct.nengines)
		rc = -ENETDOWN; /* no engine (a send before init) */
	else if (!s->port)
		rc = -vz_direct_bind_locked(s, NULL, 0);
	if (!rc)
		rc = meta_locked(s, &ip, port, &m);
	pthread_mutex_unlock(&vz_direct.lock);
	if (!rc)
		rc = send_on(send_engine(s), &m, buf, len);
	return rc ? fail(-rc) : (ssize_t)len;
}

ssize_t vz_direct_sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *to, socklen_t tolen)
{
	struct vz_direct_socket *s = hold(fd);
	ssize_t rc;

	if (!s)
		return -1;
	rc = sendto_on(s, buf, len, flags, to, tolen);
	put(s);
	return rc;
}

void vz_direct_burst(bool begin)
{
	in_burst = begin;
	if (begin || !vz_direct.ready)
		return;
	vz_direct_turn(burst_engines, true);
	burst_engines = 0;
}

/* Under vz_direct.lock: the oldest datagram, or NULL. The last one taken
 * empties the eventfd with the queue. */
static struct dgram *pop(struct vz_direct_socket *s, bool peek)
{
	struct dgram *d;

	if (s->head == s->tail)
		return NULL;
	d = s->q[s->head % QLEN];
	if (peek)
		return d;
	__atomic_store_n(&s->head, s->head + 1, __ATOMIC_RELEASE);
	if (s->head == s->tail && s->refs && vz_direct_efd_kept(s))
		vz_direct_efd_drain(s->fd);
	return d;
}

static bool readable(const struct vz_direct_socket *s)
{
	return __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&s->head, __ATOMIC_RELAXED);
}

/* A turn of the thread's engines that no other thread is turning;
 * readable after? (A socket closed meanwhile is "ready": the caller finds
 * it closed.) */
static bool turn(const void *arg)
{
	const struct vz_direct_socket *s = arg;

	if (readable(s) || !__atomic_load_n(&s->refs, __ATOMIC_RELAXED))
		return true;
	vz_direct_turn(vz_direct_my_engines(), false);
	return readable(s);
}

/* Sleep on the AF_XDP sockets of a set of engines at most `ms`: a frame
 * wakes us. */
static void sleep_port(__u32 engines, int ms)
{
	struct pollfd p[VZ_UDPD_MAX_QUEUES];
	unsigned int i;
	nfds_t n = 0;

	for (i = 0; i < vz_direct.nengines; i++)
		if (engines & (1u << i))
			p[n++] =
				(struct pollfd){ .fd = vz_direct.engines[i].xfd,
						 .events = POLLIN };
	vz_direct_sys_poll(n ? p : NULL, n, ms);
}

static __s64 deadline_of(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	return (__s64)vz_now_ns() + (__s64)tv->tv_sec * 1000000000 +
	       (__s64)tv->tv_usec * 1000;
}

/* Under vz_direct.lock: the oldest datagram if s is open (errno EAGAIN
 * when there is none, EBADF once another thread closed s). */
static struct dgram *pop_open(struct vz_direct_socket *s, bool peek)
{
	struct dgram *d = s->refs ? pop(s, peek) : NULL;

	errno = s->refs ? EAGAIN : EBADF;
	return d;
}

/* The oldest datagram; when there is none, a turn of the thread's engines
 * first. NULL with errno EAGAIN, or EBADF once another thread closed s. */
static struct dgram *take(struct vz_direct_socket *s, bool peek)
{
	struct dgram *d;

	/* the queue looked at without the lock first: empty, it is the
	 * engines' turn anyway */
	if (readable(s) || !__atomic_load_n(&s->refs, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&vz_direct.lock);
		d = pop_open(s, peek);
		pthread_mutex_unlock(&vz_direct.lock);
		if (d || errno == EBADF)
			return d;
	}
	vz_direct_turn(vz_direct_my_engines(), true);
	pthread_mutex_lock(&vz_direct.lock);
	d = pop_open(s, peek);
	pthread_mutex_unlock(&vz_direct.lock);
	return d;
}

/* The next datagram, spinning then sleeping as the socket allows: NULL
 * with errno EAGAIN (non-blocking, or SO_RCVTIMEO ran out) or EBADF. */
static struct dgram *next_dgram(struct vz_direct_socket *s, int flags)
{
	__s64 until = -2;
	struct dgram *d;
	__u32 engines;
	bool spun;

	for (;;) {
		d = take(s, flags & MSG_PEEK);
		if (d || errno == EBADF)
			return d;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			break;
		if (until == -2)
			until = deadline_of(&s->rcvtimeo);
		engines = vz_direct_my_engines();
		vz_direct_spinning(engines, true);
		spun = vz_busy_spin(turn, s, s->busy_us, until);
		vz_direct_spinning(engines, false);
		if (spun)
			continue;
		if (until >= 0 && (__s64)vz_now_ns() >= until)
			break;
		/* a frame wakes us; TICK_MS bounds the wait for the timers
		 * and for a close in another thread */
		sleep_port(engines, TICK_MS);
	}
	errno = EAGAIN;
	return NULL;
}

static ssize_t recvfrom_on(struct vz_direct_socket *s, void *buf, size_t len,
			   int flags, struct sockaddr *from, socklen_t *fromlen)
{
	struct dgram *d;
	size_t n;

	if (flags & (MSG_OOB | MSG_ERRQUEUE))
		return fail(EOPNOTSUPP);
	if (len && !buf)
		return fail(EFAULT);
	d = next_dgram(s, flags);
	if (!d)
		return -1;
	n = d->len < len ? d->len : len;
	if (n)
		memcpy(buf, d->data, n);
	if (from && fromlen)
		vz_direct_addr_put(s, from, fromlen, &d->addr, d->port);
	len = d->len;
	/* the thread serves the queue this flow comes on (not a peek:
	 * another thread may take the datagram and answer) */
	if (!(flags & MSG_PEEK)) {
		my_queues |= 1u << d->queue;
		last_queue = d->queue + 1;
		free(d);
	}
	return (ssize_t)((flags & MSG_TRUNC) ? len : n);
}

ssize_t vz_direct_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *from, socklen_t *fromlen)
{
	struct vz_direct_socket *s = hold(fd);
	ssize_t rc;

	if (!s)
		return -1;
	rc = recvfrom_on(s, buf, len, flags, from, fromlen);
	put(s);
	return rc;
}
