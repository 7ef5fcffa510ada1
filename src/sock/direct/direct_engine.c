// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's engines (direct_internal.h says which file holds what):
 * one per queue of the interface, each a stack of its own on its queue of
 * the port; what a turn of one does (frames in, timers, frames out), and
 * the neighbour answers each shares with the others.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sock/direct/direct_internal.h"
#include "sock/stack/stack.h"
#include "sock/port/port.h"

void vz_direct_turn(__u32 engines, bool wait)
{
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];

		if (!(engines & (1u << i)))
			continue;
		if (wait)
			pthread_mutex_lock(&e->lock);
		else if (pthread_mutex_trylock(&e->lock))
			continue; /* another thread is turning it */
		vz_direct_engine_run(e);
		pthread_mutex_unlock(&e->lock);
	}
}

static int on_tx(void *opaque, const void *frame, size_t len)
{
	const struct vz_direct_engine *e = opaque;

	return vz_udpd_port_tx_queue(vz_direct.port, e->queue, frame, len);
}

bool vz_direct_enqueue(struct vz_direct_socket *s, const struct in6_addr *addr,
		       __be16 port, unsigned int queue, const void *data,
		       size_t len)
{
	struct dgram *d;

	if (s->tail - s->head >= QLEN)
		return false;
	d = malloc(sizeof(*d) + len);
	if (!d)
		return false;
	d->addr = *addr;
	d->port = port;
	d->queue = queue;
	d->len = len;
	memcpy(d->data, data, len);
	if (s->tail == s->head && vz_direct_efd_kept(s))
		vz_direct_efd_ring(s->fd);
	__atomic_store_n(&s->q[s->tail % QLEN], d, __ATOMIC_RELAXED);
	__atomic_store_n(&s->tail, s->tail + 1, __ATOMIC_RELEASE);
	return true;
}

static int on_deliver(void *opaque, const struct vz_dgram_meta *m,
		      const void *payload, size_t len)
{
	const struct vz_direct_engine *e = opaque;
	int rc;

	pthread_mutex_lock(&vz_direct.lock);
	rc = vz_direct_deliver(m, e->queue, payload, len);
	pthread_mutex_unlock(&vz_direct.lock);
	return rc;
}

/* An ARP reply, or an ICMPv6 neighbour advertisement: what every engine's
 * stack must see to learn its neighbours. (The stack judges the rest.) */
static bool neighbour_answer(const unsigned char *f, size_t len)
{
	if (len >= 42 && f[12] == 0x08 && f[13] == 0x06)
		return f[20] == 0 && f[21] == 2; /* ARP, op 2 */
	return len >= 78 && f[12] == 0x86 && f[13] == 0xdd &&
	       f[20] == IPPROTO_ICMPV6 && f[54] == 136;
}

/* A copy of a neighbour answer in each other engine's inbox; each one's
 * background thread is rung to learn it now, not at its next tick. */
static void share(const struct vz_direct_engine *from, const void *frame,
		  size_t len)
{
	unsigned int i;

	if (len > INBOX_FRAME)
		return;
	for (i = 0; i < vz_direct.nengines; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];
		bool kept = false;

		if (e == from)
			continue;
		pthread_mutex_lock(&e->inbox_lock);
		if (e->ninbox < INBOX) {
			memcpy(e->inbox[e->ninbox], frame, len);
			e->inbox_len[e->ninbox++] = (unsigned short)len;
			kept = true;
		}
		pthread_mutex_unlock(&e->inbox_lock);
		if (kept)
			vz_direct_efd_ring(e->wake);
	}
}

void vz_direct_frame_in(struct vz_direct_engine *e, const void *frame,
			size_t len)
{
	vz_stack_input(e->stack, frame, len, vz_now_ns());
	if (vz_direct.nengines > 1 && neighbour_answer(frame, len))
		share(e, frame, len);
}

static void on_frame(void *opaque, const void *frame, size_t len)
{
	vz_direct_frame_in(opaque, frame, len);
}

/* Under e->lock: what the other engines shared with it. */
static void learn_shared(struct vz_direct_engine *e, __u64 now)
{
	unsigned char frames[INBOX][INBOX_FRAME];
	unsigned short lens[INBOX];
	unsigned int n, i;

	if (!__atomic_load_n(&e->ninbox, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&e->inbox_lock);
	n = e->ninbox;
	for (i = 0; i < n; i++) {
		lens[i] = e->inbox_len[i];
		memcpy(frames[i], e->inbox[i], lens[i]);
	}
	e->ninbox = 0;
	pthread_mutex_unlock(&e->inbox_lock);
	for (i = 0; i < n; i++)
		vz_stack_input(e->stack, frames[i], lens[i], now);
}

unsigned int vz_direct_engine_run(struct vz_direct_engine *e)
{
	__u64 now = vz_now_ns();
	unsigned int n;

	if (!e->stack)
		return 0; /* shut down at exit, or never opened */
	learn_shared(e, now);
	if (!vz_direct.port)
		return 0;
	n = vz_udpd_port_rx_queue(vz_direct.port, e->queue, on_frame, e, 64);
	if (now - e->last_tick >= 1000000) {
		vz_stack_tick(e->stack, now);
		e->last_tick = now;
	}
	vz_udpd_port_flush_queue(vz_direct.port, e->queue);
	__atomic_store_n(&e->last_run, now, __ATOMIC_RELAXED);
	return n;
}

bool vz_direct_config_ok(const struct vz_stack_config *cfg, char *err,
			 size_t errlen)
{
	struct vz_stack_ops ops = { .tx = on_tx, .deliver = on_deliver };
	struct vz_stack *s = vz_stack_new(cfg, &ops, err, errlen);

	vz_stack_free(s);
	return s != NULL;
}

/* An engine per queue of the port, each with a stack of its own: 0, or -1
 * with a line on stderr. */
int vz_direct_engines_new(const struct vz_stack_config *cfg)
{
	int xfds[VZ_UDPD_MAX_QUEUES];
	unsigned int n, i;
	char err[256] = "";

	n = vz_udpd_port_fds(vz_direct.port, xfds, VZ_UDPD_MAX_QUEUES);
	for (i = 0; i < n; i++) {
		struct vz_direct_engine *e = &vz_direct.engines[i];
		struct vz_stack_ops ops = { .opaque = e,
					    .tx = on_tx,
					    .deliver = on_deliver };

		pthread_mutex_init(&e->lock, NULL);
		pthread_mutex_init(&e->inbox_lock, NULL);
		e->queue = i;
		e->xfd = xfds[i];
		e->wake = -1;
		e->stack = vz_stack_new(cfg, &ops, err, sizeof(err));
		vz_direct.nengines = i + 1;
		if (!e->stack) {
			fprintf(stderr, "libveloz-sock: %s\n", err);
			return -1;
		}
	}
	return n ? 0 : -1;
}

void vz_direct_engines_free(void)
{
	unsigned int i;

	for (i = 0; i < vz_direct.nengines; i++) {
		vz_stack_free(vz_direct.engines[i].stack);
		vz_direct.engines[i].stack = NULL;
	}
}
