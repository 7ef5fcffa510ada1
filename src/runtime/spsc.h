/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A lock-free single-producer single-consumer ring of fixed-size entries:
 * the dispatcher's link to each worker, one ring each way. The producer
 * owns `head`, the consumer `tail`, each on its own cache line with a
 * cached copy of the other's index, so an uncontended push or pop touches
 * no shared line. Entries are `size` bytes, capacity a power of two.
 */
#ifndef VZ_RUNTIME_SPSC_H
#define VZ_RUNTIME_SPSC_H

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

/* Producer: false when full. */
static inline bool vz_spsc_push(struct vz_spsc *r, const void *entry)
{
	unsigned int head = r->head;

	if (head - r->tail_cache > r->mask) {
		r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head - r->tail_cache > r->mask)
			return false;
	}
	memcpy(r->slots + (size_t)(head & r->mask) * r->size, entry, r->size);
	__atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
	return true;
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
	memcpy(entry, r->slots + (size_t)(tail & r->mask) * r->size, r->size);
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
