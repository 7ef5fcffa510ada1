// SPDX-License-Identifier: BSD-2-Clause
/*
 * The poller's data path: one round of its loop (control traffic, then
 * the transmit rings drained round-robin through the send callback), the
 * need_wakeup words for when it sleeps, and received datagrams put
 * straight onto the receive ring of the socket found through the port
 * table. The only system calls here are the eventfd writes that wake an
 * application which said it sleeps. An application's shared memory is
 * untrusted: a corrupt record drops it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "sock/poller/poller_internal.h"

/* ---- the data path ---- */

/* A socket whose shared memory is corrupt: stop using it and drop its
 * application (its connection's EOF comes on the next round). */
static void sock_corrupt(struct vz_sock_server *srv, struct vz_poller_sock *s)
{
	if (s->broken)
		return;
	s->broken = true;
	srv->stats.bad_requests++;
	shutdown(s->app->fd, SHUT_RDWR);
}

/* A record no application of ours writes: an error from the ring, or more
 * than a datagram (and its IPv6 address) holds. */
static inline bool rec_corrupt(int peek, const struct vz_ring_rec *rec)
{
	return peek < 0 ||
	       rec->len >
		       VZ_STACK_MAX_UDP +
			       (rec->flags & VZ_RING_F_V6 ? VZ_RING_ADDR6 : 0);
}

/* Send one record of s's transmit ring: the send callback's answer, or
 * -errno when it cannot go. */
static inline int send_rec(struct vz_sock_server *srv, struct vz_poller_sock *s,
			   const struct vz_ring_rec *rec, const __u8 *payload,
			   vz_sock_send_fn send_fn, void *opaque)
{
	struct vz_dgram_meta m = { 0 };

	/* The library binds before sending; this is for the rest. */
	if (!s->port && vz_srv_sock_bind(srv, s, 0, NULL, 0))
		return -EAGAIN;
	if (s->v6 != !!(rec->flags & VZ_RING_F_V6) ||
	    (s->v6 && rec->len < VZ_RING_ADDR6))
		return -EAFNOSUPPORT; /* not its family: the app's bug */
	m.src_port = htons(s->port);
	m.dst_port = rec->port;
	if (s->v6) {
		m.v6 = 1;
		memcpy(m.src_ip6, s->ip6, 16); /* zero: the stack's */
		memcpy(m.dst_ip6, payload, VZ_RING_ADDR6);
		return send_fn(opaque, &m, payload + VZ_RING_ADDR6,
			       rec->len - VZ_RING_ADDR6);
	}
	m.src_ip = s->ip ? s->ip : srv->cfg.local_ip4;
	m.dst_ip = rec->addr;
	return send_fn(opaque, &m, payload, rec->len);
}

unsigned int vz_srv_drain_one(struct vz_sock_server *srv,
			      struct vz_poller_sock *s, vz_sock_send_fn send_fn,
			      void *opaque, unsigned int max)
{
	unsigned int done = 0;
	bool error = false;

	while (done < max && !s->broken) {
		struct vz_ring_rec rec;
		const __u8 *payload;
		int rc = vz_ring_peek(&s->tx, &rec, &payload);

		if (!rc)
			break;
		if (rec_corrupt(rc, &rec)) {
			sock_corrupt(srv, s);
			break;
		}
		rc = send_rec(srv, s, &rec, payload, send_fn, opaque);
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
		struct vz_poller_sock *s;

		if (srv->rr >= srv->nsocks)
			srv->rr = 0;
		s = srv->socks[srv->rr++];
		done += vz_srv_drain_one(srv, s, send_fn, opaque,
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
			work += vz_srv_accept_apps(srv);
			continue;
		}
		rc = vz_srv_app_read(srv, app);
		if (rc >= 0) {
			work += (unsigned int)rc;
			continue;
		}
		if (rc == -1)
			srv->stats.apps_died++;
		else
			srv->stats.bad_requests++;
		vz_srv_app_free(srv, app, rc == -1);
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

static bool sock_matches(const struct vz_poller_sock *s,
			 const struct vz_dgram_meta *m)
{
	if (s->broken || s->v6 != !!m->v6)
		return false;
	if (s->v6)
		return zero6(s->ip6) || !memcmp(s->ip6, m->dst_ip6, 16);
	return !s->ip || s->ip == m->dst_ip;
}

static bool from_peer(const struct vz_poller_sock *s,
		      const struct vz_dgram_meta *m, __u16 sport)
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
static struct vz_poller_sock *sock_lookup(struct vz_sock_server *srv,
					  const struct vz_dgram_meta *m)
{
	struct vz_poller_sock *s, *first = NULL;
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
	struct vz_poller_sock *s = sock_lookup(srv, m);
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
