/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The shared memory of one socket, and the byte rings in it.
 *
 * A socket's memfd holds a header page (both rings' indexes, each on its
 * own cache line, the wake-up words, SO_ERROR and the poller's sleep
 * word), then the receive ring's
 * bytes, then the transmit ring's. The poller produces on the receive ring
 * and consumes the transmit ring; the application the other way round.
 *
 * A ring carries records: a 16-byte header (length, peer address and port)
 * and the payload, padded to 8 bytes. A record never wraps: when it does
 * not fit before the end, the producer publishes a padding record that
 * fills the rest, and the consumer skips it. Indexes are free-running
 * 32-bit byte counts (sizes are powers of two, so they wrap cleanly).
 *
 * Each side keeps its own index in private memory (`pos`) and only reads
 * the other's from the shared page, validating it: an application that
 * scribbles over its rings can corrupt its own datagrams, never make the
 * poller read or write outside the mapping.
 */
#ifndef VZ_SOCK_RING_RING_H
#define VZ_SOCK_RING_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <linux/types.h>

#define VZ_SHM_HDR 4096u /* the header page; the rings follow */
#define VZ_RING_MIN 4096u /* the smallest ring */
#define VZ_RING_PAD 0xffffffffu /* record length of a padding record */
#define VZ_RING_MAX_LEN 65535u /* the longest payload a record may claim */

struct vz_ring_ctl {
	__u32 head __attribute__((aligned(64))); /* producer's */
	__u32 tail __attribute__((aligned(64))); /* consumer's */
	/* Set by the application before it sleeps on its eventfd; the
	 * poller writes the eventfd only when it finds it set. */
	__u32 waiting __attribute__((aligned(64)));
};

struct vz_sock_shm {
	struct vz_ring_ctl rx; /* poller -> application */
	struct vz_ring_ctl tx; /* application -> poller */
	/* A positive errno the send callback returned, for SO_ERROR. */
	__u32 so_error __attribute__((aligned(64)));
	/* Set by the poller before it sleeps (it found every ring idle for
	 * its busy-poll time): an application that then fills the transmit
	 * ring rings the doorbell eventfd WELCOME carried. */
	__u32 poller_asleep __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct vz_sock_shm) <= VZ_SHM_HDR, "header page");

/* Record flag: the payload opens with the peer's IPv6 address (16 bytes,
 * counted in len), for an AF_INET6 socket; addr is then 0. */
#define VZ_RING_F_V6 1u
#define VZ_RING_ADDR6 16u

struct vz_ring_rec {
	__u32 len; /* payload bytes, or VZ_RING_PAD */
	__u32 flags; /* 0, or VZ_RING_F_V6 */
	__be32 addr; /* rx: the sender; tx: the destination */
	__be16 port;
	__u16 reserved;
};

/* One side's view of a ring: `size` comes from that side's own state,
 * never from the shared page. */
struct vz_ring {
	struct vz_ring_ctl *ctl;
	__u8 *data;
	__u32 size; /* a power of two, >= VZ_RING_MIN */
	__u32 pos; /* the producer's head or the consumer's tail */
};

static inline void vz_ring_init(struct vz_ring *r, struct vz_ring_ctl *ctl,
				__u8 *data, __u32 size)
{
	r->ctl = ctl;
	r->data = data;
	r->size = size;
	r->pos = 0;
}

/* Bytes a record of `len` payload bytes takes. */
static inline __u32 vz_ring_need(size_t len)
{
	return (__u32)((sizeof(struct vz_ring_rec) + len + 7) & ~(size_t)7);
}

/* Producer: bytes used, as far as the consumer's index can be trusted
 * (a corrupt index reads as a full ring). */
static inline __u32 vz_ring_used(const struct vz_ring *r)
{
	__u32 used = r->pos - __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);

	return used > r->size ? r->size : used;
}

/*
 * Producer: would vz_ring_reserve() make progress for `len` bytes? (It
 * may first have to publish a padding record, which needs only the bytes
 * up to the end.) The exact test, so a blocked sender never spins.
 */
static inline bool vz_ring_can_reserve(const struct vz_ring *r, size_t len)
{
	__u32 free_bytes = r->size - vz_ring_used(r);
	__u32 contig = r->size - (r->pos & (r->size - 1));
	__u32 need = vz_ring_need(len);

	return contig < need ? contig <= free_bytes : need <= free_bytes;
}

/*
 * Producer: where to write a record of `len` payload bytes, or NULL when
 * there is no room now. Publishes a padding record first when the record
 * would cross the end (that frees the way even if the record then waits).
 */
static inline struct vz_ring_rec *vz_ring_reserve(struct vz_ring *r, size_t len)
{
	__u32 need = vz_ring_need(len), used = vz_ring_used(r);
	__u32 off = r->pos & (r->size - 1), contig = r->size - off;

	if (len > VZ_RING_MAX_LEN || need > r->size)
		return NULL;
	if (contig < need) {
		if (contig > r->size - used)
			return NULL;
		memcpy(r->data + off, &(__u32){ VZ_RING_PAD }, sizeof(__u32));
		r->pos += contig;
		used += contig;
		__atomic_store_n(&r->ctl->head, r->pos, __ATOMIC_RELEASE);
		off = 0;
	}
	if (need > r->size - used)
		return NULL;
	return (struct vz_ring_rec *)(r->data + off);
}

/* Producer: publish the record vz_ring_reserve() returned. */
static inline void vz_ring_commit(struct vz_ring *r, size_t len)
{
	r->pos += vz_ring_need(len);
	__atomic_store_n(&r->ctl->head, r->pos, __ATOMIC_RELEASE);
}

/*
 * Consumer: the oldest record, left in place: 1 with a copy of its header
 * in *rec and *payload pointing at its bytes (inside the mapping), 0 when
 * empty, -1 when the producer's index or the record is corrupt. Padding
 * records are consumed on the way.
 */
static inline int vz_ring_peek(struct vz_ring *r, struct vz_ring_rec *rec,
			       const __u8 **payload)
{
	for (;;) {
		__u32 head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
		__u32 avail = head - r->pos, off = r->pos & (r->size - 1);
		__u32 contig = r->size - off, len;

		if (!avail)
			return 0;
		if (avail > r->size || (avail & 7))
			return -1;
		/* Read the length once: the producer may be hostile. */
		len = __atomic_load_n((__u32 *)(r->data + off),
				      __ATOMIC_RELAXED);
		if (len == VZ_RING_PAD) {
			if (contig > avail)
				return -1;
			r->pos += contig;
			__atomic_store_n(&r->ctl->tail, r->pos,
					 __ATOMIC_RELEASE);
			continue;
		}
		if (len > VZ_RING_MAX_LEN || vz_ring_need(len) > contig ||
		    vz_ring_need(len) > avail)
			return -1;
		memcpy(rec, r->data + off, sizeof(*rec));
		rec->len = len;
		*payload = r->data + off + sizeof(*rec);
		return 1;
	}
}

/* Consumer: drop the record vz_ring_peek() returned (its header's len). */
static inline void vz_ring_release(struct vz_ring *r, __u32 len)
{
	r->pos += vz_ring_need(len);
	__atomic_store_n(&r->ctl->tail, r->pos, __ATOMIC_RELEASE);
}

/* Consumer, without side effects: is a datagram (not just padding)
 * waiting? */
static inline bool vz_ring_readable(const struct vz_ring *r)
{
	__u32 head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
	__u32 avail = head - r->pos, off = r->pos & (r->size - 1);
	__u32 len;

	if (!avail || avail > r->size)
		return false;
	len = __atomic_load_n((__u32 *)(r->data + off), __ATOMIC_RELAXED);
	return len != VZ_RING_PAD || avail > r->size - off;
}

/* Consumer: is the ring empty (padding aside, a snapshot)? */
static inline bool vz_ring_empty(const struct vz_ring *r)
{
	return __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE) == r->pos;
}

#endif
