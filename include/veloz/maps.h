/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Native maps: the userspace twins of the BPF maps an NF declares with the
 * VZ_*() macros of nf.h. Same types (the BPF_MAP_TYPE_* numbers), same
 * semantics for lookup/update/delete and the same error numbers, so an NF
 * means the same thing in both builds.
 *
 * Concurrency rule: per-CPU maps are per worker (vz_worker_id); array maps
 * are plain memory like BPF's; hash and LRU maps take a spinlock per
 * operation; LPM maps are a DIR-24-8 trie (src/maps/lpm.c) whose lookups
 * take no lock and whose updates do. Any number of workers and the control
 * plane may use any of them at once.
 */
#ifndef VELOZ_MAPS_H
#define VELOZ_MAPS_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>
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
	/* vz_map_lookup_lpm4()'s first level, indexed by an address's top 24
	 * bits with no check on the path: an IPv4 map's lpm_root (always 24
	 * bits: lpm.c); for any other LPM map vz_map_init() sets a shared
	 * read-only one whose 2^24 entries all say VZ_LPM_GROUP, which sends
	 * every lookup off the path, where the map is checked (maps.c); the
	 * same after vz_map_free(). NULL before vz_map_init(): no NF runs
	 * before its maps are initialised. */
	const __u32 *lpm4_root;
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
 * fields on every lookup of a loop, and in a burst loop those loads limit
 * how many lookups are in flight (vz-lpm-bench; figures of the current
 * code: docs/results/2026-11-28-lpm-vs-rte-lpm.md).
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
 * The LPM fast path's two ways off it, as cold, pure calls: the compiler
 * moves them and the register saves around them out of a loop of lookups,
 * and keeps the map's fields in registers across it (pure: they write
 * nothing). Inline in the loop body they cost a loop of typed lookups a
 * large share of its rate.
 * The walk below the first level is an IPv6 lookup's usual path: one call
 * more there, against its several dependent loads. vz__lpm_below() only
 * forwards to vz_lpm_lookup_groups(), but calling that (not cold) directly
 * made the IPv4 bulk loop measurably slower in vz-lpm-bench: the cold
 * attribute is what keeps the loop's layout tight (the bench's figures:
 * docs/results/2026-11-28-lpm-vs-rte-lpm.md).
 */
static __attribute__((noinline, cold, pure, unused)) void *
vz__lpm_off_path(struct vz_map *map, const void *key)
{
	return vz_map_lookup_lpm_slow(map, key);
}

static __attribute__((noinline, cold, pure, unused)) __u32
vz__lpm_below(const struct vz_map *map, const __u8 *addr, const __u32 *slot)
{
	return vz_lpm_lookup_groups(map->lpm, addr, slot);
}

/* Where a leaf's value is counted from: one value stride before the first
 * (lpm.h: a leaf is its rule's value's place in VZ_LPM_LEAF_UNIT bytes
 * from there). */
static inline __attribute__((always_inline)) uintptr_t
vz__lpm_values_before(const struct vz_map *map)
{
	return (uintptr_t)map->lpm_values - map->value_stride;
}

/* A leaf that is not empty (1..2^31-1) as the value it names: one scaled
 * add. The add is on a pointer the compiler is told is not NULL, so that
 * it knows the sum is not NULL either and a caller's own NULL check of
 * the answer folds away (told of the sum instead, GCC drops the hint when
 * it hoists the add above the branch that leads here). A
 * value is never at an address below its stride, so before is not NULL
 * wherever a leaf is. */
static inline __attribute__((always_inline)) void *
vz__lpm_leaf_value(uintptr_t before, __u32 leaf)
{
	__u8 *first = (__u8 *)before;

	if (!first)
		__builtin_unreachable();
	return first + (size_t)leaf * VZ_LPM_LEAF_UNIT;
}

/* Any leaf, empty (0: NULL) too: off the fast paths, which test for
 * a leaf first (below). */
static inline __attribute__((always_inline)) void *
vz__lpm_value(uintptr_t before, __u32 leaf)
{
	return leaf ? vz__lpm_leaf_value(before, leaf) : NULL;
}

/*
 * The fast paths' one test of the entry they loaded: as a signed word, a
 * leaf that names a rule is above 0, an empty entry is 0 and a group is
 * below. On the way to a value this is one test and one branch (with the
 * scaled add, all that waits on the entry's cache miss); testing for a
 * group and then for empty was two, and the ALU work waiting on a miss is
 * what bounds how many lookups the core keeps in flight, and so the single
 * IPv4 lookup's rate against rte_lpm's (vz-lpm-bench; see
 * docs/results/2026-11-28-lpm-vs-rte-lpm.md).
 */
static inline __attribute__((always_inline)) int vz__lpm_is_rule(__u32 e)
{
	return __builtin_expect((__s32)e > 0, 1);
}

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
	/* Every field read first, unconditionally, and the calls off the
	 * path pure: a loop of lookups loads them once. Read after a branch,
	 * they were loaded again on every lookup, a large share of a lookup's
	 * cost. */
	const __u32 *root = map->lpm_root, *slot;
	__u32 bits = map->lpm_bits, shift = map->lpm_root_shift;
	uintptr_t before = vz__lpm_values_before(map);
	__u32 prefixlen, word, e;

	memcpy(&prefixlen, key, sizeof(prefixlen));
	if (__builtin_expect(!root || prefixlen != bits, 0))
		return vz__lpm_off_path(map, key);
	memcpy(&word, addr, sizeof(word));
	slot = &root[be32toh(word) >> shift];
	/* Relaxed: the value read through a leaf is ordered after it by the
	 * address dependency, as rte_lpm's plain loads and the kernel's
	 * READ_ONCE() rely on (the writer fills a value before the release
	 * store that publishes its rule); the walk below the first level
	 * reloads this entry with acquire. */
	e = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (vz__lpm_is_rule(e))
		return vz__lpm_leaf_value(before, e);
	if (e)
		e = vz__lpm_below(map, addr, slot);
	return vz__lpm_value(before, e);
}

/*
 * The IPv4 fast path's one way off it: an entry with VZ_LPM_GROUP set,
 * which is a rule longer than the first level, or a map that is not an
 * IPv4 map (lpm4_root is then the shared first level of such entries).
 */
static __attribute__((noinline, cold, pure, unused)) void *
vz__lpm4_off_path(struct vz_map *map, const void *addr)
{
	struct {
		__u32 prefixlen;
		__u8 addr[4];
	} key = { .prefixlen = 32 };
	__u32 word;

	memcpy(&word, addr, sizeof(word));
	if (map->lpm_root && map->lpm_bits == 32)
		return vz__lpm_value(
			vz__lpm_values_before(map),
			vz_lpm_lookup_groups(
				map->lpm, addr,
				&map->lpm_root[be32toh(word) >> 8]));
	/* only an IPv4 map's key is {prefixlen, 4 bytes} */
	if (map->key_size != sizeof(key))
		return NULL;
	memcpy(key.addr, addr, sizeof(key.addr));
	return vz_map_lookup_lpm_slow(map, &key);
}

/*
 * An IPv4 LPM lookup of the 4 address bytes at addr (big endian, as in the
 * packet): what vz_map_lookup_lpm() answers for a key {32, addr}, in fewer
 * instructions. Over a full table each lookup is a cache miss, and how
 * many of them are in flight at once is what the rate is: the fewer
 * instructions a lookup takes, the more of them the core's reorder window
 * holds. So nothing is checked on the path (lpm4_root makes a map that is
 * not an IPv4 one take the way off it), not even a mask on the index, the
 * value's address is one scaled add from the entry (no multiply by the
 * stride: lpm.h), no key struct is built, and the address is read where
 * it is (the way off the path reads it again rather than keep it): BPF's
 * key, stored on the stack and read back, and the checks cost
 * vz_map_lookup() rate against rte_lpm_lookup(), which takes a bare u32,
 * and a mask and a multiply cost this one rate too (compare the vz-key
 * and single columns of docs/results/2026-11-28-lpm-vs-rte-lpm.md). An NF
 * reaches it as vz_lpm_lookup4() (nf.h), the same source in both builds.
 */
static inline __attribute__((always_inline)) void *
vz_map_lookup_lpm4(struct vz_map *map, const void *addr)
{
	/* the fields first, unconditionally: a loop of lookups loads them
	 * once (as in vz_map_lookup_lpm()) */
	const __u32 *root = map->lpm4_root;
	uintptr_t before = vz__lpm_values_before(map);
	__u32 word, e;

	memcpy(&word, addr, sizeof(word));
	/* relaxed, as in vz_map_lookup_lpm() */
	e = __atomic_load_n(&root[be32toh(word) >> 8], __ATOMIC_RELAXED);
	if (vz__lpm_is_rule(e))
		return vz__lpm_leaf_value(before, e);
	return e ? vz__lpm4_off_path(map, addr) : NULL;
}

/* Start fetching the first-level entry a key's address indexes. */
static inline __attribute__((always_inline)) void
vz__lpm_prefetch(const __u32 *root, __u32 shift, const __u8 *key)
{
	__u32 word;

	memcpy(&word, key + sizeof(__u32), sizeof(word));
	__builtin_prefetch(&root[be32toh(word) >> shift]);
}

/* A first-level entry as the value of the rule it names, or NULL for
 * anything else (empty, or a group, which a bulk lookup walks after),
 * computed with no branch: vz_map_lookup_lpm_bulk()'s. */
static inline __attribute__((always_inline)) void *
vz__lpm_rule_value_or_null(uintptr_t before, __u32 e)
{
	uintptr_t value = before + (uintptr_t)e * VZ_LPM_LEAF_UNIT;

	return (void *)(value & -(uintptr_t)((__s32)e > 0));
}

/*
 * n lookups at once, each as vz_map_lookup_lpm(): keys[] holds n keys
 * map->key_size bytes apart, values[i] gets the i-th answer (NULL: no
 * rule). For a burst of packets (what rte_lpm_lookup_bulk() and
 * rte_lpm6_lookup_bulk_func() are for), VZ_LPM_BULK keys a pass, each pass
 * in three steps that keep the burst's cache misses in flight together,
 * where a loop of single lookups waits on each in turn:
 *   1. every key's first-level entry prefetched;
 *   2. every entry read: a rule's value, or NULL, chosen with no branch
 *      (a branch on an entry that missed the cache, mispredicted on an
 *      empty one, throws away the loads issued behind it), and the keys
 *      whose entry is a group marked in a bit mask, with no branch either
 *      (a list indexed by a count the entries move made every later load
 *      wait for its store's address: lpm.h);
 *   3. those walked below the first level together, a level at a time
 *      (vz_lpm_lookup_groups_bulk(), lpm.h): an IPv6 burst's usual path.
 */
static inline void vz_map_lookup_lpm_bulk(struct vz_map *map, const void *keys,
					  void **values, __u32 n)
{
	const __u32 *root = map->lpm_root;
	__u32 bits = map->lpm_bits, shift = map->lpm_root_shift;
	uintptr_t before = vz__lpm_values_before(map);
	size_t key_size = map->key_size;
	const __u8 *key = (const __u8 *)keys, *k;
	__u32 walk[VZ_LPM_BULK], leaf[VZ_LPM_BULK];
	__u32 i, m, nwalk, prefixlen, word, e;
	__u64 groups; /* bit i: key i's entry is a group */

	_Static_assert(VZ_LPM_BULK <= 64, "a pass's keys fit in groups");

	for (; n; n -= m, key += m * key_size, values += m) {
		m = n < VZ_LPM_BULK ? n : VZ_LPM_BULK;
		if (root)
			for (i = 0; i < m; i++)
				vz__lpm_prefetch(root, shift,
						 key + i * key_size);
		for (i = 0, groups = 0; i < m; i++) {
			k = key + i * key_size;
			memcpy(&prefixlen, k, sizeof(prefixlen));
			if (__builtin_expect(!root || prefixlen != bits, 0)) {
				values[i] = vz__lpm_off_path(map, k);
				continue;
			}
			memcpy(&word, k + sizeof(__u32), sizeof(word));
			/* relaxed, as in vz_map_lookup_lpm() */
			e = __atomic_load_n(&root[be32toh(word) >> shift],
					    __ATOMIC_RELAXED);
			values[i] = vz__lpm_rule_value_or_null(before, e);
			groups |= (__u64)(e >> 31) << i;
		}
		if (!groups)
			continue;
		for (nwalk = 0; groups; groups &= groups - 1)
			walk[nwalk++] = (__u32)__builtin_ctzll(groups);
		vz_lpm_lookup_groups_bulk(map->lpm, key + sizeof(__u32),
					  key_size, walk, leaf, nwalk);
		for (i = 0; i < nwalk; i++)
			values[walk[i]] = vz__lpm_value(before, leaf[i]);
	}
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
