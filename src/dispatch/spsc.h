/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A lock-free single-producer single-consumer ring of fixed-size entries:
 * the dispatcher's link to each worker, one ring each way. The producer
 * owns `head`, the consumer `tail`, each on its own cache line with a
 * cached copy of the other's index, so an uncontended push or pop touches
 * no shared line. Entries are `size` bytes, capacity a power of two.
 */
#ifndef VZ_DISPATCH_SPSC_H
#define VZ_DISPATCH_SPSC_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct vz_spsc {
	/* producer's line */
	unsigned int head __attribute__((aligned(64)));
	unsigned int tail_cache;
	/* consumer's line */
	unsigned int tail __attribute__((aligned(64)));
	unsigned int head_cache;
	/* read-only */
	unsigned int mask __attribute__((aligned(64)));
	unsigned int size;
	unsigned char *slots;
};

static inline int vz_spsc_init(struct vz_spsc *r, unsigned int capacity,
			       unsigned int size)
{
	memset(r, 0, sizeof(*r));
	if (!capacity || (capacity & (capacity - 1)))
		return -1;
	r->slots = calloc(capacity, size);
	if (!r->slots)
		return -1;
	r->mask = capacity - 1;
	r->size = size;
	return 0;
}

static inline void vz_spsc_free(struct vz_spsc *r)
{
	free(r->slots);
	r->slots = NULL;
}

/*
 * One entry's copy. Pointer-sized entries (what rte_ring carries) get a
 * fixed-size copy, one move: a memcpy() of the runtime size is a call into
 * libc per entry, which made push and pop cost more than rte_ring's
 * (vz-ring-bench; docs/results/2026-11-24-spsc-ring-vs-rte-ring.md).
 */
static inline void vz__spsc_copy(void *dst, const void *src, unsigned int size)
{
	if (__builtin_expect(size == sizeof(unsigned long long), 1))
		memcpy(dst, src, sizeof(unsigned long long));
	else
		memcpy(dst, src, size);
}

/* Producer: false when full. */
static inline bool vz_spsc_push(struct vz_spsc *r, const void *entry)
{
	unsigned int head = r->head;

	if (head - r->tail_cache > r->mask) {
		r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head - r->tail_cache > r->mask)
			return false;
	}
	vz__spsc_copy(r->slots + (size_t)(head & r->mask) * r->size, entry,
		      r->size);
	__atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
	return true;
}

/*
 * n entries between the ring at index `at` and on (wrapping) and `buf`,
 * where they are contiguous, `size` bytes apart. Pointer-sized entries are
 * copied one word at a time, inline (as rte_ring's own copy loop): two
 * memcpy() calls into libc per burst cost more than the copy itself.
 */
static inline void vz__spsc_words(unsigned char *dst, const unsigned char *src,
				  unsigned int n)
{
	unsigned long long w[4];
	unsigned int i;

	/* four at a time, as rte_ring's copy: a plain loop here becomes a
	 * call to memcpy() again (the compiler knows the idiom) */
	for (i = 0; i + 4 <= n; i += 4) {
		memcpy(w, src + (size_t)i * sizeof(w[0]), sizeof(w));
		memcpy(dst + (size_t)i * sizeof(w[0]), w, sizeof(w));
	}
	for (; i < n; i++) {
		memcpy(w, src + (size_t)i * sizeof(w[0]), sizeof(w[0]));
		memcpy(dst + (size_t)i * sizeof(w[0]), w, sizeof(w[0]));
	}
}

static inline void vz__spsc_copy_burst(const struct vz_spsc *r, unsigned int at,
				       unsigned char *buf, unsigned int n,
				       bool in)
{
	unsigned int idx = at & r->mask, first = r->mask + 1 - idx;
	unsigned char *ring = r->slots + (size_t)idx * r->size;
	const size_t w = sizeof(unsigned long long);

	if (first > n)
		first = n;
	if (__builtin_expect(r->size == w, 1)) {
		/* the run up to the ring's end, then the wrapped rest */
		if (__builtin_expect(first == n, 1)) {
			if (in)
				vz__spsc_words(ring, buf, n);
			else
				vz__spsc_words(buf, ring, n);
		} else if (in) {
			vz__spsc_words(ring, buf, first);
			vz__spsc_words(r->slots, buf + first * w, n - first);
		} else {
			vz__spsc_words(buf, ring, first);
			vz__spsc_words(buf + first * w, r->slots, n - first);
		}
		return;
	}
	if (in) {
		memcpy(ring, buf, (size_t)first * r->size);
		memcpy(r->slots, buf + (size_t)first * r->size,
		       (size_t)(n - first) * r->size);
	} else {
		memcpy(buf, ring, (size_t)first * r->size);
		memcpy(buf + (size_t)first * r->size, r->slots,
		       (size_t)(n - first) * r->size);
	}
}

/*
 * Producer: up to n entries from `entries` (contiguous, size bytes each),
 * one index store for all of them; how many went in (0 when full).
 */
static inline unsigned int
vz_spsc_push_burst(struct vz_spsc *r, const void *entries, unsigned int n)
{
	unsigned int head = r->head, room;

	room = r->mask + 1 - (head - r->tail_cache);
	if (room < n) {
		r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		room = r->mask + 1 - (head - r->tail_cache);
		if (n > room)
			n = room;
	}
	if (!n)
		return 0;
	vz__spsc_copy_burst(r, head, (unsigned char *)entries, n, true);
	__atomic_store_n(&r->head, head + n, __ATOMIC_RELEASE);
	return n;
}

/* Consumer: up to n of the oldest entries into `entries`; how many. */
static inline unsigned int vz_spsc_pop_burst(struct vz_spsc *r, void *entries,
					     unsigned int n)
{
	unsigned int tail = r->tail, avail;

	avail = r->head_cache - tail;
	if (avail < n) {
		r->head_cache = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		avail = r->head_cache - tail;
		if (n > avail)
			n = avail;
	}
	if (!n)
		return 0;
	vz__spsc_copy_burst(r, tail, entries, n, false);
	__atomic_store_n(&r->tail, tail + n, __ATOMIC_RELEASE);
	return n;
}

/* Consumer: the oldest entry, left in place; false when empty. */
static inline bool vz_spsc_peek(struct vz_spsc *r, void *entry)
{
	unsigned int tail = r->tail;

	if (tail == r->head_cache) {
		r->head_cache = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (tail == r->head_cache)
			return false;
	}
	vz__spsc_copy(entry, r->slots + (size_t)(tail & r->mask) * r->size,
		      r->size);
	return true;
}

/* Consumer: false when empty. */
static inline bool vz_spsc_pop(struct vz_spsc *r, void *entry)
{
	if (!vz_spsc_peek(r, entry))
		return false;
	__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
	return true;
}

/*
 * Producer: the oldest entry not yet taken, left in place. Safe because
 * only the producer writes slots; the consumer may take it meanwhile, so
 * the answer can be a moment old.
 */
static inline bool vz_spsc_peek_producer(struct vz_spsc *r, void *entry)
{
	unsigned int tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);

	if (tail == r->head)
		return false;
	memcpy(entry, r->slots + (size_t)(tail & r->mask) * r->size, r->size);
	return true;
}

/* Anyone: entries in the ring now (a snapshot). */
static inline unsigned int vz_spsc_count(const struct vz_spsc *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

#endif
