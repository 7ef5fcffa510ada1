// SPDX-License-Identifier: BSD-2-Clause
/*
 * The afxdp backend's packet path: the AF_XDP rx loop. Each worker polls
 * its sockets (one per port and queue it serves) and runs the NF's native
 * build on each frame in place in the UMEM. TX and REDIRECT put the frame
 * on a TX ring without a copy (the worker's sockets share its UMEM); PASS
 * hands a copy to the port's TAP, for the kernel (vz_us_process); the rest
 * go back to the fill ring. What the kernel sends out of a TAP leaves by
 * its port. afxdp.c sets the sockets up; dispatcher.c runs the same
 * helpers behind a dispatcher.
 */
#include <errno.h>
#include <linux/if_xdp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <xdp/xsk.h>

#include "afxdp/afxdp.h"
#include "runner/xsk_stats.h"

/* ---- frames ----------------------------------------------------------------
 */

void afxdp_refill(struct worker *w, struct xsk *x)
{
	__u32 n = xsk_prod_nb_free(&x->fill, w->nfree), idx, i;

	if (n > w->nfree)
		n = w->nfree;
	if (!n || xsk_ring_prod__reserve(&x->fill, n, &idx) != n)
		return;
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) =
			w->free_frames[--w->nfree];
	xsk_ring_prod__submit(&x->fill, n);
}

void afxdp_complete(struct worker *w, struct xsk *x)
{
	__u32 idx, n, i;

	if (!x->tx_outstanding)
		return;
	n = xsk_ring_cons__peek(&x->comp, RING_SIZE, &idx);
	for (i = 0; i < n; i++)
		afxdp_frame_free(w,
				 *xsk_ring_cons__comp_addr(&x->comp, idx + i));
	xsk_ring_cons__release(&x->comp, n);
	x->tx_outstanding -= n;
}

/* ---- transmit --------------------------------------------------------------
 */

static bool tx_drained(struct xsk *x)
{
	return xsk_prod_nb_free(&x->tx, RING_SIZE) == RING_SIZE;
}

/*
 * Copy mode sends only from sendto(), and at most 32 frames per call (the
 * kernel's per-socket budget): keep kicking, once per loop, until the
 * kernel has taken everything on the ring. Zero-copy drivers send from
 * their NAPI and ask for a kick only when they need one.
 */
void afxdp_kick_tx(struct xsk *x)
{
	if (!x->tx_kick)
		return;
	if (xsk_ring_prod__needs_wakeup(&x->tx))
		sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	x->tx_kick = !tx_drained(x);
}

/*
 * Put the frames gathered for x on its TX ring. A full ring is the port's
 * backpressure: kick and reap completions until there is room, and fail
 * (count) only the frames that still do not fit after TX_STALLS tries in a
 * row without progress, so a wedged port cannot hold the worker forever.
 */
void afxdp_flush_tx(struct worker *w, struct xsk *x,
		    struct vz_worker_counters *c)
{
	__u32 n = x->pending, done = 0, room, idx, i;
	unsigned int stalls = 0;

	while (done < n && stalls < TX_STALLS) {
		room = xsk_prod_nb_free(&x->tx, n - done);
		if (room > n - done)
			room = n - done;
		if (!room ||
		    xsk_ring_prod__reserve(&x->tx, room, &idx) != room) {
			x->tx_kick = true;
			afxdp_kick_tx(x);
			afxdp_complete(w, x);
			stalls++;
			continue;
		}
		for (i = 0; i < room; i++)
			*xsk_ring_prod__tx_desc(&x->tx, idx + i) =
				x->pending_desc[done + i];
		xsk_ring_prod__submit(&x->tx, room);
		x->tx_outstanding += room;
		x->tx_kick = true;
		done += room;
		stalls = 0;
	}
	for (i = done; i < n; i++) {
		afxdp_frame_free(w, x->pending_desc[i].addr);
		c->tx_failed++;
	}
	x->pending = 0;
	afxdp_kick_tx(x);
}

void afxdp_queue_tx(struct worker *w, struct xsk *x, __u64 addr, __u32 len,
		    struct vz_worker_counters *c)
{
	if (x->pending == VZ_US_BATCH_MAX)
		afxdp_flush_tx(w, x, c);
	x->pending_desc[x->pending++] =
		(struct xdp_desc){ .addr = addr, .len = len };
}

/* ---- receive ---------------------------------------------------------------
 */

__u32 afxdp_rx_peek(struct vz_us_run *run, struct xsk *x, __u32 *idx)
{
	__u32 n = xsk_ring_cons__peek(&x->rx, run->batch, idx);

	if (!n && (run->busy_poll || xsk_ring_prod__needs_wakeup(&x->fill)))
		recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return n;
}

bool afxdp_rx_valid(struct worker *w, const struct xdp_desc *d,
		    struct vz_worker_counters *c)
{
	__u64 base = d->addr & ~(__u64)(FRAME_SIZE - 1);

	if (d->len <= VZ_LINEAR_MAX && d->addr - base >= VZ_HEADROOM)
		return true;
	/* not the geometry the NF contract promises */
	c->rx++;
	c->rx_invalid++;
	afxdp_frame_free(w, base);
	return false;
}

/* One burst from port p's queue slot q: returns the frames received. */
/* Every socket of the worker: send what is queued, take back what was sent,
 * kick the kernel if it needs it, and give the fill ring free frames. */
void afxdp_service_rings(struct worker *w, struct vz_worker_counters *c)
{
	unsigned int q;
	int p;

	for (q = 0; q < w->nqueues; q++)
		for (p = 0; p < w->run->nports; p++) {
			struct xsk *x = w->xsk[p][q];

			afxdp_flush_tx(w, x, c);
			afxdp_complete(w, x);
			afxdp_kick_tx(x);
			afxdp_refill(w, x);
		}
}

static __u32 poll_rx(struct worker *w, int p, unsigned int q,
		     struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	struct xsk *x = w->xsk[p][q];
	__u8 *area = w->area;
	__u32 idx, n, i;
	int action, out, cap;

	n = afxdp_rx_peek(run, x, &idx);
	if (!n)
		return 0;
	cap = vz_capture_burst(); /* veloz dump: once per burst */
	for (i = 0; i < n; i++) {
		const struct xdp_desc *d =
			xsk_ring_cons__rx_desc(&x->rx, idx + i);
		__u64 base = d->addr & ~(__u64)(FRAME_SIZE - 1);
		struct vz_ctx ctx = {
			.data = area + d->addr,
			.data_end = area + d->addr + d->len,
			.data_hard_start = area + base,
			.ingress_port = (__u32)p,
		};

		if (!afxdp_rx_valid(w, d, c))
			continue;
		action = vz_us_process_cap(run, &ctx, c, cap, w->id);
		out = vz_us_out_port(action, &ctx);
		if (out < 0) {
			afxdp_frame_free(w, base);
			continue;
		}
		afxdp_queue_tx(w, w->xsk[out][q], (__u64)(ctx.data - area),
			       (__u32)(ctx.data_end - ctx.data), c);
	}
	xsk_ring_cons__release(&x->rx, n);
	return n;
}

/* What the kernel sent out of the TAPs goes out of their ports. */
void afxdp_drain_taps(struct worker *w, struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	__u8 *area = w->area;
	size_t len;
	__u64 base;
	int p, budget;

	for (p = 0; p < run->nports; p++) {
		for (budget = 32; budget && w->nfree; budget--) {
			base = w->free_frames[w->nfree - 1];
			len = vz_tap_recv(&run->ports[p].tap,
					  area + base + VZ_HEADROOM,
					  FRAME_SIZE - VZ_HEADROOM);
			if (!len)
				break;
			w->nfree--;
			c->from_kernel++;
			afxdp_queue_tx(w, w->xsk[p][0], base + VZ_HEADROOM,
				       (__u32)len, c);
		}
	}
}

void *afxdp_worker_main(void *arg)
{
	struct worker *w = arg;
	struct vz_us_run *run = w->run;
	struct vz_worker_counters *c = &run->counters[w->id];
	unsigned long loops = 0;
	unsigned int q;
	int p;

	vz_us_worker_enter(w->id);
	while (!run->stop) {
		vz_us_pause_point(run);
		for (q = 0; q < w->nqueues; q++)
			for (p = 0; p < run->nports; p++)
				poll_rx(w, p, q, c);
		if (w->id == 0 && ++loops % TAP_POLL_EVERY == 0)
			afxdp_drain_taps(w, c);
		afxdp_service_rings(w, c);
	}
	return NULL;
}
