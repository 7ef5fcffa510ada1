/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The longest-prefix-match table behind native LPM maps, reader side: the
 * layout and the lock-free lookup, public so that an NF's lookup on a
 * VZ_LPM map compiles inline into the NF (nf.h, maps.h). The writer side
 * is src/maps/lpm.h and lpm.c.
 *
 * The table: a multibit trie in
 * the style of DPDK's rte_lpm (DIR-24-8), mapping an address to the rule that
 * covers it with the longest prefix. It knows rules only by an index (the
 * map's node); maps.c keeps the rules themselves (key, value), decides what
 * replaces a deleted rule and serialises writers with the map's lock.
 *
 * Levels: the first level is one table indexed by the first 24 bits of a
 * 4-byte address (DIR-24-8) or of a longer one in a table of 65536 rules
 * or more (IPv6 full tables, as rte_lpm6), by the first 16 bits of a
 * longer one in a smaller table (IPv6: 16, then 8, 8, ...), or by the
 * whole address when it has fewer than 4 bytes; every further level is a group
 * of 256 entries indexed by the next byte. A lookup is one load from the first
 * level and, only under prefixes longer than that level, one more per byte.
 *
 * Entries are 32-bit words:
 *   0                            empty: no rule covers these addresses
 *   (rule + 1) * leaf_scale      a leaf (bit 31 clear): this rule answers
 *   VZ_LPM_GROUP | group         the answer depends on the next byte
 * The prefix length that set a leaf is not in the word: depth[rule] holds it
 * (the writer needs it; a lookup does not), so all 31 bits name the rule.
 * leaf_scale is the map's value stride in units of VZ_LPM_LEAF_UNIT (8)
 * bytes, so a leaf is where the rule's value is, in those units, from one
 * stride before the first value: an NF turns the entry it loaded into its
 * value's address with one scaled add (x86's lea), where rule + 1 took a
 * multiply by the stride too, on the path every lookup waits on
 * (vz_map_lookup_lpm4(), maps.h; docs/results/2026-11-28-lpm-vs-rte-lpm.md).
 *
 * Controlled prefix expansion: a rule of length d sets every entry of its
 * range at the level where d ends whose rule is d long or shorter (or
 * empty), and the same below, in child groups. Deleting it rewrites its own
 * entries to the rule it uncovers (the longest shorter rule covering it,
 * which the caller finds) or to empty. A group left with 256 equal leaves no
 * longer has a deeper rule under it: its parent entry becomes that leaf and
 * the group goes on a free list for the next insert to reuse.
 *
 * Memory: the first level is mmap()ed (64 MiB when 24 bits index it, with
 * transparent huge pages for full-size tables); untouched pages cost
 * nothing. Groups (1 KiB each) come from chunks of 256 groups allocated as
 * needed (in a full-size table, eight at a time on a 2 MiB huge page: a
 * lookup below the first level reads a group per level, and on 4 KiB pages
 * each of those missed the TLB too), up to what max_rules can use: each rule
 * longer than the first level needs at most one group per level below it. The
 * chunk pointer array is allocated once at its final size and never moves, so
 * readers may follow it while the writer adds chunks.
 *
 * Concurrency: lookups take no lock and write nothing. The writer stores
 * every entry with one atomic 32-bit store (release), fills a group before
 * it publishes the entry pointing to it, and collapses a group by publishing
 * the replacing leaf before freeing the group. A reader therefore sees, for
 * each entry, either the word before a change or the word after it, and may
 * briefly answer with a rule that was just deleted or replaced, or follow a
 * group that was just freed (its entries are still the right ones) - the
 * same rule as BPF: a map value pointer is good for this frame only, do not
 * hold it across frames. A freed group being reused for other addresses
 * would be wrong answers, not old ones, so reuse bumps gen and a lookup that
 * went through a group retries if gen moved meanwhile (a sequence count;
 * lookups the first level answers never read it).
 */
#ifndef VELOZ_LPM_H
#define VELOZ_LPM_H

#include <endian.h>
#include <linux/types.h>
#include <stddef.h>
#include <string.h>

#define VZ_LPM_NONE 0xffffffffu /* no rule */
#define VZ_LPM_GROUP 0x80000000u /* entry names a child group */
#define VZ_LPM_MAX_RULES 0x7fffffffu /* rule + 1 fits in 31 bits */
#define VZ_LPM_LEAF_UNIT 8 /* bytes: a value stride is a multiple of it */
#define VZ_LPM_MAX_DATA 256 /* address bytes, as the kernel's LPM trie */
#define VZ_LPM_CHUNK_SHIFT 8 /* 256 groups (256 KiB) per chunk */

struct vz_lpm {
	/* What lookups read. */
	__u32 *root; /* 2^(8 * root_bytes) entries */
	__u32 **chunks; /* group g: chunks[g >> 8] + (g & 255) * 256 */
	__u32 gen; /* bumped before a freed group is reused */
	__u32 root_bytes; /* address bytes indexing the first level: 1..3 */
	__u32 root_shift; /* 32 - 8 * root_bytes */
	__u32 data_bytes; /* address bytes */
	__u32 leaf_scale; /* rule r's leaf is (r + 1) * leaf_scale */
	/* The writer's, under the map's lock. */
	__u16 *depth; /* per rule: its prefix length */
	__u32 max_rules;
	__u32 max_groups; /* what max_rules rules can need at most */
	__u32 ngroups; /* groups handed out so far (chunks cover them) */
	__u32 nchunks; /* chunks allocated */
	/* chunks allocated at once: 8 (2 MiB on a transparent huge page) in
	 * a table sized for a full routing table, else 1 */
	__u32 chunks_per_block;
	__u32 *free_groups; /* stack of freed groups, room for ngroups */
	__u32 nfree;
	size_t root_size; /* bytes mapped at root */
};

static inline const __u32 *vz_lpm_group(const struct vz_lpm *t, __u32 g)
{
	return t->chunks[g >> VZ_LPM_CHUNK_SHIFT] +
	       ((size_t)(g & ((1u << VZ_LPM_CHUNK_SHIFT) - 1)) << 8);
}

/* A leaf's rule (an empty entry's: VZ_LPM_NONE), off the NF's path: the
 * division is the writer's and the control plane's. */
static inline __u32 vz_lpm_rule(const struct vz_lpm *t, __u32 leaf)
{
	return leaf / t->leaf_scale - 1;
}

static inline __u32 vz_lpm_root_index(const struct vz_lpm *t, const __u8 *addr)
{
	__u32 word;

	if (__builtin_expect(t->data_bytes >= 4, 1)) {
		memcpy(&word, addr, sizeof(word));
		return be32toh(word) >> t->root_shift;
	}
	switch (t->data_bytes) {
	case 3:
		return (__u32)addr[0] << 16 | (__u32)addr[1] << 8 | addr[2];
	case 2:
		return (__u32)addr[0] << 8 | addr[1];
	default:
		return addr[0];
	}
}

/*
 * Below the first level. gen is read first, then the first-level entry
 * again: the reuse of any group met from here on moves gen (a release store
 * before the group's new entries, each a release store too), and the walk
 * retries. The loads are acquires, so the last read of gen stays last.
 * Out of line and pure (it writes nothing): acquires inline are compiler
 * barriers, and a loop of lookups would reload the table's fields (and the
 * map's) on every lookup, though first-level answers never come here.
 * Returns the leaf (0: empty), which vz_lpm_rule() names.
 */
static __attribute__((noinline, pure, unused)) __u32
vz_lpm_lookup_groups(const struct vz_lpm *t, const __u8 *addr,
		     const __u32 *slot)
{
	const __u8 *next, *end = addr + t->data_bytes;
	__u32 gen, e;

	for (;;) {
		gen = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
		e = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		for (next = addr + t->root_bytes;
		     (e & VZ_LPM_GROUP) && next < end; next++)
			e = __atomic_load_n(vz_lpm_group(t, e & ~VZ_LPM_GROUP) +
						    *next,
					    __ATOMIC_ACQUIRE);
		if (!(e & VZ_LPM_GROUP) &&
		    __atomic_load_n(&t->gen, __ATOMIC_RELAXED) == gen)
			return e;
	}
}

/* Keys a bulk walk takes at once (vz_lpm_lookup_groups_bulk()). */
#define VZ_LPM_BULK 32

/* Where key j of a bulk walk points next: into its group, by its next
 * byte, while its entry names one; else at gen, a line in the cache (so
 * that neither pass below branches on an entry). */
static inline __attribute__((always_inline)) const __u32 *
vz__lpm_bulk_next(const struct vz_lpm *t, __u32 e, const __u8 *byte)
{
	return (e & VZ_LPM_GROUP) ? vz_lpm_group(t, e & ~VZ_LPM_GROUP) + *byte
				  : &t->gen;
}

/*
 * vz_lpm_lookup_groups() for n <= VZ_LPM_BULK addresses at once, level by
 * level: at each byte below the first level, one pass prefetches the
 * entry every key still on a group needs and a second reads them, so the
 * loads of a level are in flight together, where one walk after another
 * waits for each of its loads in turn (a routed IPv6 lookup reads three
 * or four groups; the routed bulk rows of
 * docs/results/2026-11-28-lpm-vs-rte-lpm.md). Key
 * which[j]'s address is addr0 + which[j] * stride; leaf[j] gets its leaf
 * (0: empty).
 *
 * Nothing in the passes depends on an entry but the next load's address:
 * no branch on it (a mispredicted branch on an entry that missed the
 * cache throws away the loads issued behind it), and no list of the keys
 * still walking (a store to list[count], count moved by the entries, made
 * every later load wait for the store's address, and the walk ran
 * several times slower). A key already at its leaf reads gen instead.
 *
 * gen as in vz_lpm_lookup_groups(): read before the first level is read
 * again, compared after; if it moved, or an entry is a group past the last
 * byte (a torn read), every key takes that walk, which retries.
 */
static __attribute__((noinline, unused)) void
vz_lpm_lookup_groups_bulk(const struct vz_lpm *t, const __u8 *addr0,
			  size_t stride, const __u32 *which, __u32 *leaf,
			  __u32 n)
{
	const __u32 *next;
	const __u8 *addr;
	__u32 gen, e, j, byte, groups = VZ_LPM_GROUP;

	gen = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
	for (j = 0; j < n; j++) {
		addr = addr0 + which[j] * stride;
		leaf[j] = __atomic_load_n(&t->root[vz_lpm_root_index(t, addr)],
					  __ATOMIC_ACQUIRE);
	}
	for (byte = t->root_bytes; groups && byte < t->data_bytes; byte++) {
		for (j = 0; j < n; j++)
			__builtin_prefetch(vz__lpm_bulk_next(
				t, leaf[j], addr0 + which[j] * stride + byte));
		for (j = 0, groups = 0; j < n; j++) {
			next = vz__lpm_bulk_next(
				t, leaf[j], addr0 + which[j] * stride + byte);
			e = __atomic_load_n(next, __ATOMIC_ACQUIRE);
			/* a key at its leaf keeps it (a select, no branch) */
			e = (leaf[j] & VZ_LPM_GROUP) ? e : leaf[j];
			leaf[j] = e;
			groups |= e;
		}
		groups &= VZ_LPM_GROUP;
	}
	if (!groups && __atomic_load_n(&t->gen, __ATOMIC_RELAXED) == gen)
		return;
	for (j = 0; j < n; j++) {
		addr = addr0 + which[j] * stride;
		leaf[j] = vz_lpm_lookup_groups(
			t, addr, &t->root[vz_lpm_root_index(t, addr)]);
	}
}

/*
 * The leaf of the rule with the longest prefix covering addr (data_bytes
 * bytes, network order), 0 if none. Lock-free; on every packet's path: one
 * load when the first level answers.
 */
static inline __u32 vz_lpm_lookup_leaf(const struct vz_lpm *t, const __u8 *addr)
{
	const __u32 *slot = &t->root[vz_lpm_root_index(t, addr)];
	__u32 e = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (__builtin_expect(e & VZ_LPM_GROUP, 0))
		e = vz_lpm_lookup_groups(t, addr, slot);
	return e;
}

/* ...as the rule, or VZ_LPM_NONE: the control plane's (a division). */
static inline __u32 vz_lpm_lookup(const struct vz_lpm *t, const __u8 *addr)
{
	return vz_lpm_rule(t, vz_lpm_lookup_leaf(t, addr));
}

#endif /* VELOZ_LPM_H */
