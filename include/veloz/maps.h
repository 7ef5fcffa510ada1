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
};

/* The worker running on this thread; selects the per-CPU copy. */
extern __thread __u32 vz_worker_id __attribute__((tls_model("initial-exec")));

int vz_map_init(struct vz_map *map, __u32 nworkers);
void vz_map_free(struct vz_map *map);

void *vz_map_lookup_slow(struct vz_map *map, const void *key);
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
	const struct vz_lpm *t = map->lpm;
	__u32 prefixlen, n;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (__builtin_expect(!t || prefixlen != t->data_bytes * 8, 0))
		return vz_map_lookup_slow(map, key);
	n = vz_lpm_lookup(t, (const __u8 *)key + sizeof(prefixlen));
	if (n == VZ_LPM_NONE)
		return NULL;
	return map->lpm_values + (size_t)n * map->value_stride;
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
		return vz_map_lookup_lpm(map, key);
	default:
		return vz_map_lookup_slow(map, key);
	}
}

#ifdef __cplusplus
}
#endif

#endif /* VELOZ_MAPS_H */
