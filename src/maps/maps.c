// SPDX-License-Identifier: BSD-2-Clause
/*
 * Native maps with the semantics of the kernel's BPF maps: the same flags,
 * the same error numbers, preallocated storage (a full hash map refuses a new
 * key with -E2BIG; an LRU map evicts its least recently used entry instead;
 * an LPM map answers the longest matching prefix).
 *
 * Hash-like maps share one table: a pool of max_entries nodes, chained
 * buckets and a recency list (used by LRU only).
 *
 * LPM maps keep their rules in that table too, keyed by (prefixlen, address
 * masked to it), which is what update, delete, read and next_key work on;
 * beside it a multibit trie (lpm.c, DIR-24-8 for IPv4) maps an address to
 * the node of its longest matching rule. Lookups go through the trie
 * without the lock (lpm.h says what a reader may see while the control
 * plane writes); writers take the lock and change both.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <veloz/maps.h>

#include "maps/lpm.h"

__thread __u32 vz_worker_id __attribute__((tls_model("initial-exec")));

#define VZ_NIL 0xffffffffu
_Static_assert(VZ_NIL == VZ_LPM_NONE, "the trie answers nodes");

struct vz_node {
	__u32 next; /* bucket chain, or free list */
	__u32 lru_prev;
	__u32 lru_next;
	__u32 in_use;
};

struct vz_map_impl {
	pthread_spinlock_t lock;
	__u32 nbuckets; /* power of two */
	__u32 *buckets;
	struct vz_node *nodes;
	__u8 *keys; /* max_entries * key_size */
	__u8 *vals; /* max_entries * per-node value bytes */
	size_t vals_mapped; /* bytes mmap()ed at vals, or 0: calloc()ed */
	__u64 node_value_bytes;
	__u32 free_head;
	__u32 free_tail; /* LPM: freed nodes queue here, reused last */
	__u32 lru_head; /* most recently used */
	__u32 lru_tail;
	__u32 count;
	/* One past the highest node ever used: iteration stops here, so a dump
	 * of a big table holding a few entries does not walk all of it. */
	__u32 high_water;
	__u8 *scratch_key; /* LPM writes build masked keys here */
	__u8 *scratch_probe; /* ...and look for covering rules here */
	/* LPM: rules of each prefix length, 0..address bits: a probe for a
	 * covering rule skips the lengths no rule has (a global IPv6 table
	 * uses about 20 of 129), where it hashed a key for every one */
	__u32 *rules_of_len;
	struct vz_lpm lpm;
};

static __u64 round_up(__u64 n, __u64 to)
{
	return (n + to - 1) / to * to;
}

static int is_percpu(const struct vz_map *map)
{
	return map->type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       map->type == BPF_MAP_TYPE_PERCPU_HASH ||
	       map->type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static int is_lpm(const struct vz_map *map)
{
	return map->type == BPF_MAP_TYPE_LPM_TRIE;
}

static int is_lru(const struct vz_map *map)
{
	return map->type == BPF_MAP_TYPE_LRU_HASH ||
	       map->type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

/* FNV-1a: keys are small and this is not the fast path's hash. */
static __u32 hash_key(const void *key, __u32 size)
{
	const __u8 *byte = key;
	__u32 hash = 2166136261u;
	__u32 i;

	for (i = 0; i < size; i++)
		hash = (hash ^ byte[i]) * 16777619u;
	return hash;
}

/*
 * An LPM map's values are read by every lookup, at the rule the trie
 * answers: with a full table and random addresses, anywhere in megabytes.
 * On huge pages those reads cost no page walk (the first level is on huge
 * pages for the same reason, lpm.c); an NF's lookup is then no more than
 * DPDK's rte_lpm's plus the read of the value it returns. 2 MiB aligned,
 * so that the kernel can back it with huge pages from the first touch.
 */
#define VALS_HUGE (2u << 20)

static __u8 *vals_alloc(struct vz_map_impl *impl, size_t bytes, int lpm)
{
	size_t len = (bytes + VALS_HUGE - 1) / VALS_HUGE * VALS_HUGE;
	__u8 *raw, *vals;
	size_t lead;

	if (!lpm || bytes < VALS_HUGE)
		return calloc(1, bytes ? bytes : 1);
	raw = mmap(NULL, len + VALS_HUGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	lead = (VALS_HUGE - ((size_t)raw & (VALS_HUGE - 1))) & (VALS_HUGE - 1);
	if (lead)
		munmap(raw, lead);
	vals = raw + lead;
	if (VALS_HUGE - lead)
		munmap(vals + len, VALS_HUGE - lead);
	madvise(vals, len, MADV_HUGEPAGE); /* a hint */
	impl->vals_mapped = len;
	return vals;
}

static void vals_free(struct vz_map_impl *impl)
{
	if (impl->vals_mapped)
		munmap(impl->vals, impl->vals_mapped);
	else
		free(impl->vals);
	impl->vals = NULL;
	impl->vals_mapped = 0;
}

static int impl_init(struct vz_map *map)
{
	struct vz_map_impl *impl;
	__u32 i;

	impl = calloc(1, sizeof(*impl));
	if (!impl)
		return -ENOMEM;
	map->impl = impl;
	pthread_spin_init(&impl->lock, PTHREAD_PROCESS_PRIVATE);
	impl->nbuckets = 1;
	while (impl->nbuckets < map->max_entries)
		impl->nbuckets <<= 1;
	impl->node_value_bytes =
		is_percpu(map) ? map->worker_stride : map->value_stride;
	impl->buckets = malloc(sizeof(*impl->buckets) * impl->nbuckets);
	impl->nodes = calloc(map->max_entries, sizeof(*impl->nodes));
	impl->keys = calloc(map->max_entries, map->key_size);
	impl->vals = vals_alloc(
		impl, (size_t)map->max_entries * impl->node_value_bytes,
		is_lpm(map));
	impl->scratch_key = calloc(1, map->key_size);
	impl->scratch_probe = calloc(1, map->key_size);
	if (!impl->buckets || !impl->nodes || !impl->keys || !impl->vals ||
	    !impl->scratch_key || !impl->scratch_probe)
		return -ENOMEM;
	for (i = 0; i < impl->nbuckets; i++)
		impl->buckets[i] = VZ_NIL;
	for (i = 0; i < map->max_entries; i++)
		impl->nodes[i].next = i + 1 < map->max_entries ? i + 1 : VZ_NIL;
	impl->free_head = 0;
	impl->free_tail = map->max_entries - 1;
	impl->lru_head = impl->lru_tail = VZ_NIL;
	if (is_lpm(map)) {
		__u32 data_bytes = map->key_size - (__u32)sizeof(__u32);
		int err;

		impl->rules_of_len = calloc(data_bytes * 8 + 1, sizeof(__u32));
		if (!impl->rules_of_len)
			return -ENOMEM;
		/* leaves count VZ_LPM_LEAF_UNIT bytes of values (lpm.h) */
		err = vz_lpm_init(&impl->lpm, data_bytes, map->max_entries,
				  map->value_stride / VZ_LPM_LEAF_UNIT);
		if (err)
			return err;
		/* what vz_map_lookup_lpm() reads, without the lock */
		map->lpm_values = impl->vals;
		map->lpm = &impl->lpm;
		map->lpm_bits = impl->lpm.data_bytes * 8;
		map->lpm_root_shift = impl->lpm.root_shift;
		if (impl->lpm.data_bytes >= 4)
			map->lpm_root = impl->lpm.root;
		if (impl->lpm.data_bytes == 4 && impl->lpm.root_shift == 8)
			map->lpm4_root = impl->lpm.root;
	}
	return 0;
}

int vz_map_init(struct vz_map *map, __u32 nworkers)
{
	/* off vz_map_lookup_lpm4()'s path until an IPv4 trie is there (and
	 * after vz_map_free()); an NF never runs before this */
	map->lpm4_root = is_lpm(map) ? vz_lpm4_elsewhere() : NULL;
	if (is_lpm(map) && !map->lpm4_root)
		return -ENOMEM;
	if (!map->key_size || !map->value_size || !map->max_entries ||
	    nworkers == 0 || nworkers > VZ_MAX_WORKERS)
		return -EINVAL;
	map->value_stride = (__u32)round_up(map->value_size, 8);
	map->nworkers = is_percpu(map) ? nworkers : 1;

	switch (map->type) {
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
		if (map->key_size != sizeof(__u32))
			return -EINVAL;
		map->worker_stride = round_up(
			(__u64)map->max_entries * map->value_stride, 64);
		map->values =
			aligned_alloc(64, map->worker_stride * map->nworkers);
		if (!map->values)
			return -ENOMEM;
		memset(map->values, 0, map->worker_stride * map->nworkers);
		return 0;
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_LRU_HASH:
	case BPF_MAP_TYPE_LRU_PERCPU_HASH:
		/* per-CPU hash values: nworkers copies, one stride apart */
		map->worker_stride = map->value_stride;
		if (is_percpu(map))
			map->worker_stride *= map->nworkers;
		return impl_init(map);
	case BPF_MAP_TYPE_LPM_TRIE:
		/* the kernel's limits: 1 to 256 address bytes */
		if (map->key_size <= sizeof(__u32) ||
		    map->key_size > sizeof(__u32) + VZ_LPM_MAX_DATA ||
		    !(map->flags & BPF_F_NO_PREALLOC))
			return -EINVAL;
		if (map->max_entries > VZ_LPM_MAX_RULES)
			return -E2BIG;
		map->worker_stride = map->value_stride;
		return impl_init(map);
	default:
		return -EINVAL;
	}
}

void vz_map_free(struct vz_map *map)
{
	struct vz_map_impl *impl = map->impl;

	free(map->values);
	map->values = NULL;
	map->lpm = NULL;
	map->lpm_values = NULL;
	map->lpm_root = NULL;
	map->lpm_root_shift = 0;
	map->lpm_bits = 0;
	map->lpm4_root = is_lpm(map) ? vz_lpm4_elsewhere() : NULL;
	if (impl) {
		pthread_spin_destroy(&impl->lock);
		free(impl->buckets);
		free(impl->nodes);
		free(impl->keys);
		vals_free(impl);
		free(impl->scratch_key);
		free(impl->scratch_probe);
		free(impl->rules_of_len);
		vz_lpm_free(&impl->lpm);
		free(impl);
		map->impl = NULL;
	}
}

/* ---- the shared hash table ----------------------------------------------- */

static __u8 *node_key(struct vz_map *map, __u32 n)
{
	return map->impl->keys + (size_t)n * map->key_size;
}

static __u8 *node_value(struct vz_map *map, __u32 n)
{
	return map->impl->vals + (size_t)n * map->impl->node_value_bytes;
}

static __u32 *bucket_of(struct vz_map *map, const void *key)
{
	struct vz_map_impl *impl = map->impl;

	return &impl->buckets[hash_key(key, map->key_size) &
			      (impl->nbuckets - 1)];
}

static __u32 find_node(struct vz_map *map, const void *key)
{
	__u32 n = *bucket_of(map, key);

	while (n != VZ_NIL && memcmp(node_key(map, n), key, map->key_size))
		n = map->impl->nodes[n].next;
	return n;
}

static void lru_unlink(struct vz_map_impl *impl, __u32 n)
{
	struct vz_node *node = &impl->nodes[n];

	if (node->lru_prev != VZ_NIL)
		impl->nodes[node->lru_prev].lru_next = node->lru_next;
	else
		impl->lru_head = node->lru_next;
	if (node->lru_next != VZ_NIL)
		impl->nodes[node->lru_next].lru_prev = node->lru_prev;
	else
		impl->lru_tail = node->lru_prev;
}

static void lru_push_front(struct vz_map_impl *impl, __u32 n)
{
	struct vz_node *node = &impl->nodes[n];

	node->lru_prev = VZ_NIL;
	node->lru_next = impl->lru_head;
	if (impl->lru_head != VZ_NIL)
		impl->nodes[impl->lru_head].lru_prev = n;
	impl->lru_head = n;
	if (impl->lru_tail == VZ_NIL)
		impl->lru_tail = n;
}

static void remove_node(struct vz_map *map, __u32 n)
{
	struct vz_map_impl *impl = map->impl;
	__u32 *link = bucket_of(map, node_key(map, n));

	while (*link != n)
		link = &impl->nodes[*link].next;
	*link = impl->nodes[n].next;
	lru_unlink(impl, n);
	impl->nodes[n].in_use = 0;
	impl->count--;
	if (is_lpm(map)) {
		/* lock-free readers may still be on n: reuse it last */
		impl->nodes[n].next = VZ_NIL;
		if (impl->free_head == VZ_NIL)
			impl->free_head = n;
		else
			impl->nodes[impl->free_tail].next = n;
		impl->free_tail = n;
		return;
	}
	impl->nodes[n].next = impl->free_head;
	impl->free_head = n;
}

static __u32 alloc_node(struct vz_map *map)
{
	struct vz_map_impl *impl = map->impl;
	__u32 n;

	if (impl->free_head == VZ_NIL) {
		if (!is_lru(map) || impl->lru_tail == VZ_NIL)
			return VZ_NIL;
		remove_node(map, impl->lru_tail);
	}
	n = impl->free_head;
	impl->free_head = impl->nodes[n].next;
	if (n >= impl->high_water)
		impl->high_water = n + 1;
	return n;
}

static int hash_update(struct vz_map *map, const void *key, const void *value,
		       __u64 flags, int all_workers)
{
	struct vz_map_impl *impl = map->impl;
	__u32 n = find_node(map, key), w;
	__u32 *bucket;
	__u8 *dst;

	if (n != VZ_NIL && flags == BPF_NOEXIST)
		return -EEXIST;
	if (n == VZ_NIL && flags == BPF_EXIST)
		return -ENOENT;
	if (n == VZ_NIL) {
		n = alloc_node(map);
		if (n == VZ_NIL)
			return is_lpm(map) ? -ENOSPC : -E2BIG;
		memcpy(node_key(map, n), key, map->key_size);
		memset(node_value(map, n), 0, impl->node_value_bytes);
		bucket = bucket_of(map, key);
		impl->nodes[n].next = *bucket;
		impl->nodes[n].in_use = 1;
		*bucket = n;
		lru_push_front(impl, n);
		impl->count++;
	} else if (is_lru(map)) {
		lru_unlink(impl, n);
		lru_push_front(impl, n);
	}
	dst = node_value(map, n);
	if (!is_percpu(map)) {
		memcpy(dst, value, map->value_size);
	} else if (all_workers) {
		for (w = 0; w < map->nworkers; w++)
			memcpy(dst + (size_t)w * map->value_stride,
			       (const __u8 *)value +
				       (size_t)w * map->value_stride,
			       map->value_size);
	} else {
		/* from an NF: its own copy; the others start at zero (BPF) */
		memcpy(dst + (size_t)vz_worker_id * map->value_stride, value,
		       map->value_size);
	}
	return 0;
}

/* ---- LPM: entries keyed by (prefixlen, address masked to prefixlen) ------ */

static __u32 lpm_data_bits(const struct vz_map *map)
{
	return (map->key_size - (__u32)sizeof(__u32)) * 8;
}

static void lpm_mask(struct vz_map *map, __u8 *key, __u32 prefixlen)
{
	__u8 *data = key + sizeof(__u32);
	__u32 bytes = map->key_size - (__u32)sizeof(__u32), i;

	memcpy(key, &prefixlen, sizeof(prefixlen));
	for (i = 0; i < bytes; i++) {
		if (prefixlen >= (i + 1) * 8)
			continue;
		if (prefixlen <= i * 8)
			data[i] = 0;
		else
			data[i] &= (__u8)(0xff << (8 - (prefixlen - i * 8)));
	}
}

/*
 * The longest rule no longer than maxlen covering key's address, by probing
 * the table: what a deleted rule uncovers, and lookups with a prefixlen
 * shorter than the address (rare; the trie answers the longest match only).
 */
static __u32 lpm_probe(struct vz_map *map, const void *key, __u32 maxlen)
{
	__u8 *probe = map->impl->scratch_probe;
	__u32 plen, n;

	for (plen = maxlen + 1; plen-- > 0;) {
		if (!map->impl->rules_of_len[plen])
			continue;
		memcpy(probe, key, map->key_size);
		lpm_mask(map, probe, plen);
		n = find_node(map, probe);
		if (n != VZ_NIL)
			return n;
	}
	return VZ_NIL;
}

/* Under the lock: the rule a lookup answers, as BPF's: the longest prefix
 * no longer than key's prefixlen; none past the address's bits. */
static __u32 lpm_match(struct vz_map *map, const void *key)
{
	struct vz_lpm *lpm = &map->impl->lpm;
	__u32 prefixlen, n;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (prefixlen > lpm_data_bits(map))
		return VZ_NIL;
	n = vz_lpm_lookup(lpm, (const __u8 *)key + sizeof(__u32));
	if (n == VZ_NIL || vz_lpm_depth(lpm, n) <= prefixlen)
		return n;
	return lpm_probe(map, key, prefixlen);
}

static __attribute__((noinline)) void *lpm_lookup_short(struct vz_map *map,
							const void *key)
{
	struct vz_map_impl *impl = map->impl;
	__u32 n;

	pthread_spin_lock(&impl->lock);
	n = lpm_match(map, key);
	pthread_spin_unlock(&impl->lock);
	return n == VZ_NIL ? NULL : node_value(map, n);
}

/*
 * A lookup through the generic entry point: the NF-facing inline one
 * (maps.h), kept a leaf function. Values are updated in place, under the
 * lock, so a reader racing an update of the same rule may see part of
 * each, as with BPF hash maps; a rule's value never moves.
 */
static __attribute__((noinline)) void *lpm_lookup(struct vz_map *map,
						  const void *key)
{
	__u32 prefixlen;

	if (!map->lpm)
		return NULL; /* vz_map_init() failed */
	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (__builtin_expect(prefixlen != map->impl->lpm.data_bytes * 8, 0))
		return lpm_lookup_short(map, key);
	if (map->lpm_root)
		return vz_map_lookup_lpm(map, key);
	/* addresses under 4 bytes: the trie's own first-level index; the leaf
	 * names the value as on the inline path, with no division */
	return vz__lpm_value(
		vz__lpm_values_before(map),
		vz_lpm_lookup_leaf(map->lpm,
				   (const __u8 *)key + sizeof(prefixlen)));
}

static int lpm_update(struct vz_map *map, const void *key, const void *value,
		      __u64 flags, int all_workers)
{
	struct vz_map_impl *impl = map->impl;
	__u8 *masked = impl->scratch_key;
	__u32 prefixlen, count = impl->count, n;
	int err;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (prefixlen > lpm_data_bits(map))
		return -EINVAL;
	memcpy(masked, key, map->key_size);
	lpm_mask(map, masked, prefixlen);
	err = hash_update(map, masked, value, flags, all_workers);
	if (err || impl->count == count)
		return err; /* a new value for a rule the trie has */
	/* the node's value is written: now readers may find it */
	n = find_node(map, masked);
	err = vz_lpm_add(&impl->lpm, masked + sizeof(__u32), prefixlen, n);
	if (err)
		remove_node(map, n);
	else
		impl->rules_of_len[prefixlen]++;
	return err;
}

static int lpm_delete(struct vz_map *map, const void *key)
{
	__u8 *masked = map->impl->scratch_key;
	__u32 prefixlen, n, uncovered;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (prefixlen > lpm_data_bits(map))
		return -EINVAL;
	memcpy(masked, key, map->key_size);
	lpm_mask(map, masked, prefixlen);
	n = find_node(map, masked);
	if (n == VZ_NIL)
		return -ENOENT;
	uncovered = prefixlen ? lpm_probe(map, masked, prefixlen - 1) : VZ_NIL;
	/* the trie lets go of n before n can be reused */
	vz_lpm_delete(&map->impl->lpm, masked + sizeof(__u32), prefixlen, n,
		      uncovered);
	remove_node(map, n);
	map->impl->rules_of_len[prefixlen]--;
	return 0;
}

/* ---- the API ------------------------------------------------------------- */

static __attribute__((noinline)) void *hash_lookup(struct vz_map *map,
						   const void *key)
{
	struct vz_map_impl *impl = map->impl;
	void *value = NULL;
	__u32 n;

	pthread_spin_lock(&impl->lock);
	n = find_node(map, key);
	if (n != VZ_NIL) {
		if (is_lru(map)) {
			lru_unlink(impl, n);
			lru_push_front(impl, n);
		}
		value = node_value(map, n);
		if (is_percpu(map))
			value = (__u8 *)value +
				(size_t)vz_worker_id * map->value_stride;
	}
	pthread_spin_unlock(&impl->lock);
	return value;
}

/* Both lookups are tail calls: the LPM one stays free of the hash path's
 * stack frame. */
void *vz_map_lookup_slow(struct vz_map *map, const void *key)
{
	if (!map->impl)
		return NULL;
	if (is_lpm(map))
		return lpm_lookup(map, key);
	return hash_lookup(map, key);
}

void *vz_map_lookup_lpm_slow(struct vz_map *map, const void *key)
{
	if (!map->impl || !is_lpm(map))
		return NULL;
	return lpm_lookup(map, key);
}

static int array_write(struct vz_map *map, const void *key, const void *value,
		       __u64 flags, int all_workers)
{
	__u32 index = *(const __u32 *)key, w;

	if (index >= map->max_entries)
		return -E2BIG;
	if (flags == BPF_NOEXIST)
		return -EEXIST; /* every array slot always exists */
	for (w = 0; w < map->nworkers; w++) {
		const __u8 *src = value;

		if (is_percpu(map)) {
			if (!all_workers && w != vz_worker_id)
				continue;
			if (all_workers)
				src += (size_t)w * map->value_stride;
		}
		memcpy(map->values + w * map->worker_stride +
			       (size_t)index * map->value_stride,
		       src, map->value_size);
	}
	return 0;
}

static int map_write(struct vz_map *map, const void *key, const void *value,
		     __u64 flags, int all_workers)
{
	int err;

	if (flags > BPF_EXIST)
		return -EINVAL;
	if (map->values)
		return array_write(map, key, value, flags, all_workers);
	if (!map->impl)
		return -EINVAL;
	pthread_spin_lock(&map->impl->lock);
	if (is_lpm(map))
		err = lpm_update(map, key, value, flags, all_workers);
	else
		err = hash_update(map, key, value, flags, all_workers);
	pthread_spin_unlock(&map->impl->lock);
	return err;
}

int vz_map_update_elem(struct vz_map *map, const void *key, const void *value,
		       __u64 flags)
{
	return map_write(map, key, value, flags, 0);
}

int vz_map_write(struct vz_map *map, const void *key, const void *value,
		 __u64 flags)
{
	return map_write(map, key, value, flags, 1);
}

int vz_map_delete_elem(struct vz_map *map, const void *key)
{
	__u32 n;
	int err = 0;

	if (map->values)
		return -EINVAL; /* array slots cannot be deleted */
	if (!map->impl)
		return -EINVAL;
	pthread_spin_lock(&map->impl->lock);
	if (is_lpm(map)) {
		err = lpm_delete(map, key);
	} else {
		n = find_node(map, key);
		if (n == VZ_NIL)
			err = -ENOENT;
		else
			remove_node(map, n);
	}
	pthread_spin_unlock(&map->impl->lock);
	return err;
}

int vz_map_read(struct vz_map *map, const void *key, void *value)
{
	__u32 index, n, w;
	int err = 0;

	if (map->values) {
		index = *(const __u32 *)key;
		if (index >= map->max_entries)
			return -ENOENT;
		for (w = 0; w < map->nworkers; w++)
			memcpy((__u8 *)value + (size_t)w * map->value_stride,
			       map->values + w * map->worker_stride +
				       (size_t)index * map->value_stride,
			       map->value_size);
		return 0;
	}
	if (!map->impl)
		return -EINVAL;
	pthread_spin_lock(&map->impl->lock);
	n = is_lpm(map) ? lpm_match(map, key) : find_node(map, key);
	if (n == VZ_NIL) {
		err = -ENOENT;
	} else if (is_percpu(map)) {
		for (w = 0; w < map->nworkers; w++)
			memcpy((__u8 *)value + (size_t)w * map->value_stride,
			       node_value(map, n) +
				       (size_t)w * map->value_stride,
			       map->value_size);
	} else {
		memcpy(value, node_value(map, n), map->value_size);
	}
	pthread_spin_unlock(&map->impl->lock);
	return err;
}

int vz_map_next_key(struct vz_map *map, const void *key, void *next_key)
{
	struct vz_map_impl *impl = map->impl;
	__u32 index = 0, prefixlen, n;
	int err = -ENOENT;

	if (map->values) {
		if (key)
			index = *(const __u32 *)key + 1;
		if (index >= map->max_entries)
			return -ENOENT;
		memcpy(next_key, &index, sizeof(index));
		return 0;
	}
	if (!impl)
		return -EINVAL;
	/* Node order is stable between calls that do not change the map. */
	pthread_spin_lock(&impl->lock);
	n = 0;
	if (key && is_lpm(map)) {
		/* as the kernel's: host bits do not count; a prefixlen past the
		 * address starts over */
		memcpy(&prefixlen, key, sizeof(prefixlen));
		if (prefixlen <= lpm_data_bits(map)) {
			memcpy(impl->scratch_key, key, map->key_size);
			lpm_mask(map, impl->scratch_key, prefixlen);
			key = impl->scratch_key;
		} else {
			key = NULL;
		}
	}
	if (!is_lru(map)) {
		/*
		 * Every map but an LRU one keeps its live nodes on one list
		 * (lru_*: newest first), changed only by updates and deletes:
		 * a dump walks the entries, not every slot up to the high-water
		 * mark. An LPM map reuses a freed slot last (lock-free readers
		 * may still be on it), so once a table has churned through all
		 * its slots the scan below walked all max_entries for a dump of
		 * a few rules: a long fuzz-ctl run fell from ~6,000 to ~1,000
		 * inputs/s on it.
		 */
		n = key ? find_node(map, key) : VZ_NIL;
		n = n == VZ_NIL ? impl->lru_head : impl->nodes[n].lru_next;
		if (n != VZ_NIL) {
			memcpy(next_key, node_key(map, n), map->key_size);
			err = 0;
		}
		pthread_spin_unlock(&impl->lock);
		return err;
	}
	/* An LRU map's list moves on every lookup: its slots, in order. */
	if (key) {
		n = find_node(map, key);
		n = n == VZ_NIL ? 0 : n + 1;
	}
	for (; n < impl->high_water; n++) {
		if (impl->nodes[n].in_use) {
			memcpy(next_key, node_key(map, n), map->key_size);
			err = 0;
			break;
		}
	}
	pthread_spin_unlock(&impl->lock);
	return err;
}
