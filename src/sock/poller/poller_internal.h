/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The poller's socket table, inside (server.h is its API), shared by:
 *
 *   server.c       set-up and teardown, shared memory, ports, sockets
 *   server_req.c   the applications' connections and control requests
 *   server_data.c  the data path: draining the transmit rings, delivering
 *                  onto receive rings (ring.h), waking applications
 *
 * One thread runs all of it (the poller's loop), so nothing here locks.
 */
#ifndef VZ_SOCK_POLLER_POLLER_INTERNAL_H
#define VZ_SOCK_POLLER_POLLER_INTERNAL_H

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock/ring/proto.h"
#include "sock/ring/ring.h"
#include "sock/poller/server.h"

#define VZ_EPH_LO 32768u /* Linux's default ip_local_port_range */
#define VZ_EPH_HI 60999u
#define VZ_TX_BURST 32u /* datagrams from one ring before the next */
#define VZ_REQ_BURST 16u /* requests from one application per round */
#define VZ_MAX_GROUPS 1024u

struct vz_app;

struct vz_poller_sock {
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
	struct vz_poller_sock *next_port; /* the sockets sharing the port */
	struct vz_poller_sock *next_app;
	unsigned int slot; /* in srv->socks */
};

struct vz_app {
	int fd;
	uid_t uid;
	unsigned int slot; /* in srv->apps */
	__u32 next_id;
	struct vz_poller_sock *socks;
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
	struct vz_poller_sock **ports; /* 65536 lists, by host-order port */
	struct vz_app **apps;
	unsigned int napps;
	struct vz_poller_sock **socks;
	unsigned int nsocks, rr;
	__u32 eph_next;
	struct vz_sock_server_stats stats;
	/* vz_sock_server_poll's callback while it runs (NULL otherwise),
	 * to send what a closing socket left queued. */
	vz_sock_send_fn send_fn;
	void *send_opaque;
};

/* server.c */
void vz_srv_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
__u32 vz_srv_ring_size(const struct vz_sock_server *srv, __u32 want);
/* A fresh memfd for both rings of s: the memfd to pass on, or -errno. */
int vz_srv_shm_create(struct vz_poller_sock *s, __u32 rx_size, __u32 tx_size);
int vz_srv_sock_bind(struct vz_sock_server *srv, struct vz_poller_sock *s,
		     __be32 ip, const __u8 *ip6, __u16 port);
struct vz_poller_sock *vz_srv_sock_find(const struct vz_app *app, __u32 id);
void vz_srv_sock_free(struct vz_sock_server *srv, struct vz_poller_sock *s);
void vz_srv_sock_flush(struct vz_sock_server *srv, struct vz_poller_sock *s);

/* server_req.c: the listening socket's and the applications' traffic;
 * vz_srv_app_read: requests served, -1 when the application left, -2
 * when it sent something malformed. */
unsigned int vz_srv_accept_apps(struct vz_sock_server *srv);
int vz_srv_app_read(struct vz_sock_server *srv, struct vz_app *app);
void vz_srv_app_free(struct vz_sock_server *srv, struct vz_app *app,
		     bool flush);

/* server_data.c: send up to max datagrams of s's transmit ring. */
unsigned int vz_srv_drain_one(struct vz_sock_server *srv,
			      struct vz_poller_sock *s, vz_sock_send_fn send_fn,
			      void *opaque, unsigned int max);

static inline bool zero6(const __u8 *a)
{
	static const __u8 zero[16];

	return !memcmp(a, zero, 16);
}

/*
 * Wake the application if it sleeps on this ring. The fence pairs with the
 * application's (it sets `waiting`, fences, re-checks the ring): either it
 * sees our last index or we see its flag.
 */
static inline void vz_wake(struct vz_poller_sock *s, struct vz_ring_ctl *c)
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

#endif
