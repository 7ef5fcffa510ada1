// SPDX-License-Identifier: BSD-2-Clause
/*
 * The generator over AF_XDP: the same frames as the live-frames path (same
 * template, source ports, sequence numbers, timestamps and checksums), put
 * on an AF_XDP socket's TX ring instead of being made by an XDP program.
 * This is how traffic leaves a NIC whose driver lacks ndo_xdp_xmit, and the
 * socket is TX only: no program is attached, nothing is received.
 *
 * The UMEM frames are filled with the template once; per frame only the
 * source port, the payload's sequence number and timestamp, and the L4
 * checksum are written. Frames are used round-robin: one is reused only
 * after its completion came back, since the ring is at most NUM_FRAMES deep.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <xdp/xsk.h>

#include "common/err.h"
#include "common/parse.h"
#include "gen/gen.h"
#include "gen/xsk_tx.h"
#include "common/clock.h"

#define NUM_FRAMES 4096
#define FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
#define RING_SIZE 2048
#define BATCH 64
#define DRAIN_S 1.0 /* how long the last completions may take */

struct sender {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp;
	void *area;
	__u64 submitted, completed;
};

/* What gen.bpf.c does per frame, in userspace (see its comments). */
static void stamp(const struct vz_xsk_tx *t, __u8 *f, __u64 seq)
{
	struct vz_gen_payload p = { .seq = seq, .tx_ns = vz_now_ns() };
	__u16 sport = htons((__u16)(t->base_port + seq % t->flows)), csum;
	__u16 words[sizeof(p) / 2];

	memcpy(f + t->l4_off, &sport, 2);
	memcpy(f + t->payload_off, &p, sizeof(p));
	if (!t->csum_off)
		return;
	memcpy(&csum, t->frame + t->csum_off, 2); /* the template's */
	memcpy(words, &p, sizeof(p)); /* p is packed: no aligned words in it */
	csum = vz_gen_stamped_csum(csum, sport, words);
	memcpy(f + t->csum_off, &csum, 2);
}

static int open_socket(const struct vz_xsk_tx *t, struct sender *s)
{
	struct xsk_socket_config cfg = {
		.rx_size = 0,
		.tx_size = RING_SIZE,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_USE_NEED_WAKEUP,
	};
	size_t size = (size_t)NUM_FRAMES * FRAME_SIZE;
	int err, i;

	s->area = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->area == MAP_FAILED) {
		s->area = NULL;
		vz_err("cannot map %zu bytes for the UMEM: %s", size,
		       strerror(errno));
		return -ENOMEM;
	}
	for (i = 0; i < NUM_FRAMES; i++)
		memcpy((__u8 *)s->area + (size_t)i * FRAME_SIZE, t->frame,
		       t->size);
	err = xsk_umem__create(&s->umem, s->area, size, &s->fill, &s->comp,
			       NULL);
	if (err) {
		vz_err("cannot register the UMEM: %s", strerror(-err));
		return err;
	}
	err = xsk_socket__create(&s->xsk, t->ifname, t->queue, s->umem, NULL,
				 &s->tx, &cfg);
	if (err) {
		vz_err("cannot open an AF_XDP socket on %s queue %u: %s",
		       t->ifname, t->queue, strerror(-err));
		return err;
	}
	return 0;
}

static void close_socket(struct sender *s)
{
	if (s->xsk)
		xsk_socket__delete(s->xsk);
	if (s->umem)
		xsk_umem__delete(s->umem);
	if (s->area)
		munmap(s->area, (size_t)NUM_FRAMES * FRAME_SIZE);
}

static void reap(struct sender *s)
{
	__u32 idx, n = xsk_ring_cons__peek(&s->comp, RING_SIZE, &idx);

	if (n) {
		xsk_ring_cons__release(&s->comp, n);
		s->completed += n;
	}
}

/* Copy mode sends only from sendto(), up to 32 frames a call. */
static int kick(struct sender *s)
{
	if (!xsk_ring_prod__needs_wakeup(&s->tx))
		return 0;
	if (sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) <
		    0 &&
	    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS &&
	    errno != EINTR)
		return -errno;
	return 0;
}

static int submit(const struct vz_xsk_tx *t, struct sender *s, __u32 n)
{
	__u32 idx, i;

	n = xsk_ring_prod__reserve(&s->tx, n, &idx);
	for (i = 0; i < n; i++) {
		__u64 seq = s->submitted + i;
		__u64 addr = (seq % NUM_FRAMES) * FRAME_SIZE;
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&s->tx, idx + i);

		stamp(t, (__u8 *)s->area + addr, seq);
		d->addr = addr;
		d->len = t->size;
	}
	if (n) {
		xsk_ring_prod__submit(&s->tx, n);
		s->submitted += n;
	}
	return kick(s);
}

/*
 * Paced: is a frame due? If not, let copy mode drain meanwhile and sleep
 * toward when one is (not for under 50 us: the sleep would overshoot).
 * 1 if one is due, 0 if not yet, -errno if the kick failed.
 */
static int frame_due(const struct vz_xsk_tx *t, struct sender *s, double start,
		     double now)
{
	double due = start + (double)s->submitted / (double)t->rate;
	int err;

	if (due <= now)
		return 1;
	err = kick(s);
	if (err)
		return err;
	if (due - now > 50e-6)
		vz_sleep_until(due, t->stop);
	return 0;
}

/* Frames to submit now: in flight never more than the UMEM or TX ring. */
static __u32 batch_room(const struct vz_xsk_tx *t, const struct sender *s)
{
	__u64 room = NUM_FRAMES - (s->submitted - s->completed), n;

	if (room > RING_SIZE)
		room = RING_SIZE;
	n = room < BATCH ? room : BATCH;
	if (t->count && t->count - s->submitted < n)
		n = t->count - s->submitted;
	return (__u32)n;
}

/* What was submitted leaves, or is given up after DRAIN_S. */
static void drain(struct sender *s)
{
	double drain_until = vz_now_s() + DRAIN_S;

	while (s->completed < s->submitted && vz_now_s() < drain_until) {
		if (kick(s))
			break;
		reap(s);
	}
}

__u64 vz_xsk_tx_send(const struct vz_xsk_tx *t, double *elapsed, int *err)
{
	struct sender s = { 0 };
	double start, now;
	int due;

	*elapsed = 0;
	*err = open_socket(t, &s);
	if (*err) {
		close_socket(&s);
		return 0;
	}
	start = vz_now_s();
	while (!*t->stop) {
		now = vz_now_s();
		if (t->count ? s.submitted >= t->count
			     : now - start >= t->duration)
			break;
		reap(&s);
		due = t->rate ? frame_due(t, &s, start, now) : 1;
		if (due < 0) {
			*err = due;
			break;
		}
		if (!due)
			continue;
		*err = submit(t, &s, batch_room(t, &s));
		if (*err)
			break;
	}
	*elapsed = vz_now_s() - start;
	drain(&s);
	if (*err)
		vz_err("AF_XDP transmit on %s failed: %s", t->ifname,
		       strerror(-*err));
	close_socket(&s);
	return s.completed;
}
