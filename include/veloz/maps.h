/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Native maps: the userspace twins of the BPF maps an NF declares with the
 * VZ_*() macros of nf.h. Same types (the BPF_MAP_TYPE_* numbers), same
 * semantics for lookup/update/delete and the same error numbers, so an NF
 * means the same thing in both builds.
 *
 * Concurrency rule: per-CPU maps are per worker (vz_worker_id); array maps
 * are plain memory like BPF's; hash and LRU maps take a spinlock per
 * operation; LPM maps are a DIR-24-8 trie (src/runtime/lpm.c) whose lookups
 * take no lock and whose updates do. Any number of workers and the control
 * plane may use any of them at once.
 */
#ifndef VELOZ_MAPS_H
#define VELOZ_MAPS_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <stddef.h>
#include <string.h>

#include <veloz/lpm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VZ_MAX_WORKERS 64

struct vz_map_impl;

struct vz_map {
	const char *name;
	__u32 type; /* enum bpf_map_type */
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 flags;
	/* Filled by vz_map_init(): */
	__u32 value_stride; /* value_size rounded up to 8, as BPF does */
	__u32 nworkers; /* copies of a per-CPU value */
	__u64 worker_stride; /* bytes between two workers' copies */
	__u8 *values; /* array maps: the values themselves */
	struct vz_map_impl *impl; /* hash, LRU and LPM maps */
	/* LPM maps, for the inline lookup: the trie (in impl) and the rules'
	 * values, value_stride apart and indexed by the trie's answer. */
	const struct vz_lpm *lpm;
	__u8 *lpm_values;
	/* The trie's first level, copied here from lpm: fields of the map
	 * itself, a global the NF's stack key cannot alias, so a loop of
	 * lookups loads them once, where through lpm every store to the key
	 * (whose address escapes) would reload them. NULL when the first level
	 * is not indexed by 32-bit words (addresses under 4 bytes). */
	const __u32 *lpm_root;
	__u32 lpm_root_shift; /* lpm->root_shift */
	__u32 lpm_bits; /* lpm->data_bytes * 8: a full-length prefixlen */
};

/* The worker running on this thread; selects the per-CPU copy. */
extern __thread __u32 vz_worker_id __attribute__((tls_model("initial-exec")));

int vz_map_init(struct vz_map *map, __u32 nworkers);
void vz_map_free(struct vz_map *map);

void *vz_map_lookup_slow(struct vz_map *map, const void *key);
/*
 * The LPM fast path's fallback (a prefixlen shorter than the address, or a
 * map vz_map_init() failed on), declared pure: it writes nothing an NF can
 * see (its probes use the map's own scratch key, under the map's lock).
 * Without that, the compiler must assume that this call, on every lookup's
 * path though never taken, may change the map, and reloads the map's
 * fields on every lookup of a loop: in a burst loop those loads held the
 * lookups in flight to half of rte_lpm's (vz-lpm-bench, bench/README.md).
 */
void *vz_map_lookup_lpm_slow(struct vz_map *map, const void *key)
	__attribute__((pure));
int vz_map_update_elem(struct vz_map *map, const void *key, const void *value,
		       __u64 flags);
int vz_map_delete_elem(struct vz_map *map, const void *key);

/*
 * Control-plane access, shaped like bpf_map_lookup_elem(2) on a map fd:
 * per-CPU maps read and write all workers' copies at once, laid out one
 * value_stride apart.
 */
int vz_map_read(struct vz_map *map, const void *key, void *value);
int vz_map_write(struct vz_map *map, const void *key, const void *value,
		 __u64 flags);
/* Iterate keys: next_key after key (NULL for the first); -ENOENT at the end. */
int vz_map_next_key(struct vz_map *map, const void *key, void *next_key);

/*
 * An LPM lookup as an NF makes it: the typed fast path. The key is BPF's
 * (__u32 prefixlen, then the address); a full-length prefixlen, the one
 * NFs use, goes straight to the trie, inline in the caller, with no call,
 * lock or map-type dispatch between the NF and the first-level load. A
 * shorter prefixlen (BPF asks for the longest rule no longer than it) is
 * rare and takes the library's locked path.
 */
static inline __attribute__((always_inline)) void *
vz_map_lookup_lpm(struct vz_map *map, const void *key)
{
	const __u8 *addr = (const __u8 *)key + sizeof(__u32);
	/* every field read first, unconditionally: a loop hoists them */
	const __u32 *root = map->lpm_root, *slot;
	__u32 bits = map->lpm_bits, shift = map->lpm_root_shift;
	__u8 *values = map->lpm_values;
	size_t stride = map->value_stride;
	__u32 prefixlen, word, e;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (__builtin_expect(!root || prefixlen != bits, 0))
		return vz_map_lookup_lpm_slow(map, key);
	memcpy(&word, addr, sizeof(word));
	slot = &root[be32toh(word) >> shift];
	/* Relaxed: the value read through a leaf is ordered after it by the
	 * address dependency, as rte_lpm's plain loads and the kernel's
	 * READ_ONCE() rely on (the writer fills a value before the release
	 * store that publishes its rule); the walk below the first level
	 * reloads this entry with acquire. */
	e = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (__builtin_expect(e & VZ_LPM_GROUP, 0))
		e = vz_lpm_lookup_groups(map->lpm, addr, slot) + 1;
	/* empty (0): no rule covers addr. A select, not a branch: over
	 * uniform addresses, routed or not is a coin toss the branch
	 * predictor loses, and each miss flushes the lookups in flight. */
	values += (size_t)(e - 1) * stride;
	return e ? values : NULL;
}

/* Array and LPM lookups are on every packet's path (stats, routes): keep
 * them inline. */
static inline void *vz_map_lookup_elem(struct vz_map *map, const void *key)
{
	__u32 index;

	switch (map->type) {
	case BPF_MAP_TYPE_ARRAY:
		index = *(const __u32 *)key;
		if (index >= map->max_entries)
			return NULL;
		return map->values + (size_t)index * map->value_stride;
	case BPF_MAP_TYPE_PERCPU_ARRAY:
		index = *(const __u32 *)key;
		if (index >= map->max_entries)
			return NULL;
		/* worker-major, cache-line aligned: no false sharing */
		return map->values + vz_worker_id * map->worker_stride +
		       (size_t)index * map->value_stride;
	case BPF_MAP_TYPE_LPM_TRIE:
		/* a call: the inline walk is VZ_LPM maps' (nf.h), whose key
		 * type is known; here key may be any map's */
		return vz_map_lookup_lpm_slow(map, key);
	default:
		return vz_map_lookup_slow(map, key);
	}
}

#ifdef __cplusplus
}
#endif

#endif /* VELOZ_MAPS_H */
