// SPDX-License-Identifier: BSD-2-Clause
/*
 * The LPM table's writer side: adding and removing rules by controlled
 * prefix expansion, and the group pool. See lpm.h for the layout and the
 * rules readers rely on. Every function here runs under the map's lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "maps/lpm.h"

#define GROUP_ENTRIES 256
#define CHUNK_GROUPS (1u << VZ_LPM_CHUNK_SHIFT)
#define MAX_GROUPS 0x7fffffffu /* group numbers fit beside VZ_LPM_GROUP */
/*
 * Tables sized for a full routing table get huge pages for a 64 MiB first
 * level: random lookups over it would miss the TLB on 4 KiB pages, and such
 * a table touches most of it anyway.
 */
#define HUGE_PAGE_RULES 65536
/* ...and their groups in blocks of 8 chunks (2 MiB), each on a huge page */
#define BLOCK_CHUNKS 8
#define HUGE_PAGE (2u << 20)
_Static_assert(BLOCK_CHUNKS *CHUNK_GROUPS * 256 * sizeof(__u32) == HUGE_PAGE,
	       "a block is one huge page");

static void store(__u32 *entry, __u32 word)
{
	__atomic_store_n(entry, word, __ATOMIC_RELEASE);
}

/* Rule's leaf; VZ_LPM_NONE's is 0, empty. */
static __u32 leaf(const struct vz_lpm *t, __u32 rule)
{
	return (rule + 1) * t->leaf_scale;
}

static __u32 *group_entries(struct vz_lpm *t, __u32 g)
{
	return (__u32 *)vz_lpm_group(t, g);
}

int vz_lpm_init(struct vz_lpm *t, __u32 data_bytes, __u32 max_rules,
		__u32 leaf_scale)
{
	__u64 max_groups = 0, level = 1;
	__u32 below, k;
	void *root;

	memset(t, 0, sizeof(*t));
	/* every leaf, (max_rules) * leaf_scale at most, fits in 31 bits */
	if (!data_bytes || data_bytes > VZ_LPM_MAX_DATA || !max_rules ||
	    !leaf_scale || max_rules > VZ_LPM_MAX_RULES / leaf_scale)
		return -EINVAL;
	t->data_bytes = data_bytes;
	t->leaf_scale = leaf_scale;
	/* A 24-bit first level for IPv4, and for longer addresses in tables
	 * sized for a full routing table (as rte_lpm6's): one dependent load
	 * fewer on every lookup under a prefix longer than /16. Small tables
	 * of long addresses keep a 16-bit one (256 KiB, not 64 MiB). */
	t->root_bytes = data_bytes < 4 ? data_bytes
			: data_bytes == 4 || max_rules >= HUGE_PAGE_RULES ? 3
									  : 2;
	t->root_shift = 32 - 8 * t->root_bytes;
	t->max_rules = max_rules;
	/*
	 * A group lives only while a rule longer than its level lies under it,
	 * and a rule has one group per level on its way down: per level below
	 * the first, at most max_rules groups, and no more than the level
	 * above has entries.
	 */
	below = data_bytes - t->root_bytes;
	for (k = 0; k < below && max_groups < MAX_GROUPS; k++) {
		level = k ? level * GROUP_ENTRIES : 1ull << (8 * t->root_bytes);
		if (level > MAX_GROUPS)
			level = MAX_GROUPS;
		max_groups += level < max_rules ? level : max_rules;
	}
	t->max_groups =
		max_groups < MAX_GROUPS ? (__u32)max_groups : MAX_GROUPS;

	t->root_size = sizeof(__u32) << (8 * t->root_bytes);
	root = mmap(NULL, t->root_size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (root == MAP_FAILED)
		goto nomem;
	t->root = root;
	if (t->root_size >= (2u << 20) && max_rules >= HUGE_PAGE_RULES)
		madvise(root, t->root_size, MADV_HUGEPAGE); /* a hint */
	t->depth = calloc(max_rules, sizeof(*t->depth));
	if (!t->depth)
		goto nomem;
	t->chunks_per_block = max_rules >= HUGE_PAGE_RULES ? BLOCK_CHUNKS : 1;
	if (t->max_groups) {
		t->chunks = calloc((t->max_groups + CHUNK_GROUPS - 1) /
					   CHUNK_GROUPS,
				   sizeof(*t->chunks));
		if (!t->chunks)
			goto nomem;
	}
	return 0;
nomem:
	vz_lpm_free(t);
	return -ENOMEM;
}

void vz_lpm_free(struct vz_lpm *t)
{
	__u32 c;

	if (t->root)
		munmap(t->root, t->root_size);
	/* a block's first chunk is what was allocated */
	for (c = 0; c < t->nchunks; c += t->chunks_per_block)
		if (t->chunks_per_block == 1)
			free(t->chunks[c]);
		else
			munmap(t->chunks[c], HUGE_PAGE);
	free(t->chunks);
	free(t->depth);
	free(t->free_groups);
	memset(t, 0, sizeof(*t));
}

/*
 * Zeroed memory for the next chunk, of groups groups: its own allocation,
 * or in a table with blocks, the next chunk of the current block (a new
 * block every BLOCK_CHUNKS chunks: 2 MiB of fresh anonymous memory, 2 MiB
 * aligned and advised onto a huge page before it is touched; zero already,
 * so nothing is written until groups are).
 */
static __u32 *chunk_new(struct vz_lpm *t, __u32 groups)
{
	__u8 *map, *block;
	size_t len = 2 * (size_t)HUGE_PAGE;

	if (t->chunks_per_block == 1)
		return calloc((size_t)groups * GROUP_ENTRIES, sizeof(__u32));
	if (t->nchunks % t->chunks_per_block)
		return t->chunks[t->nchunks - 1] +
		       (size_t)CHUNK_GROUPS * GROUP_ENTRIES;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	/* the aligned 2 MiB inside, the rest given back */
	block = (__u8 *)(((uintptr_t)map + HUGE_PAGE - 1) &
			 ~(uintptr_t)(HUGE_PAGE - 1));
	if (block > map)
		munmap(map, (size_t)(block - map));
	munmap(block + HUGE_PAGE, (size_t)(map + len - (block + HUGE_PAGE)));
	madvise(block, HUGE_PAGE, MADV_HUGEPAGE); /* a hint */
	return (__u32 *)block;
}

/* Make sure need more groups can be had without failing. */
static int groups_reserve(struct vz_lpm *t, __u32 need)
{
	__u32 fresh, groups, *grown;

	if (need <= t->nfree)
		return 0;
	fresh = need - t->nfree;
	if (fresh > t->max_groups - t->ngroups)
		return -ENOMEM;
	while (t->nchunks * CHUNK_GROUPS < t->ngroups + fresh) {
		groups = t->max_groups - t->nchunks * CHUNK_GROUPS;
		if (groups > CHUNK_GROUPS)
			groups = CHUNK_GROUPS;
		/* room to free every group: freeing never fails */
		grown = realloc(t->free_groups,
				sizeof(*grown) *
					(t->nchunks * CHUNK_GROUPS + groups));
		if (!grown)
			return -ENOMEM;
		t->free_groups = grown;
		t->chunks[t->nchunks] = chunk_new(t, groups);
		if (!t->chunks[t->nchunks])
			return -ENOMEM;
		t->nchunks++;
	}
	return 0;
}

/* A group (reserved beforehand) with every entry fill, not yet published. */
static __u32 group_take(struct vz_lpm *t, __u32 fill)
{
	__u32 g, i, *entries;

	if (t->nfree) {
		g = t->free_groups[--t->nfree];
		/* A reader still on g that sees one of its new entries (each a
		 * release store, after this) sees gen move too, and retries;
		 * one that sees gen move sees g unlinked (release). */
		__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELEASE);
	} else {
		g = t->ngroups++;
	}
	entries = group_entries(t, g);
	for (i = 0; i < GROUP_ENTRIES; i++)
		store(&entries[i], fill);
	return g;
}

static int group_uniform(const __u32 *entries)
{
	__u32 i;

	if (entries[0] & VZ_LPM_GROUP)
		return 0;
	for (i = 1; i < GROUP_ENTRIES; i++)
		if (entries[i] != entries[0])
			return 0;
	return 1;
}

/* Entries [first, first + count) and the groups under them: the new rule
 * takes every address whose rule is no longer than it. */
static void expand(struct vz_lpm *t, __u32 *entries, __u32 first, __u32 count,
		   __u32 leaf, __u32 depth)
{
	__u32 i, e;

	for (i = first; i < first + count; i++) {
		e = entries[i];
		if (e & VZ_LPM_GROUP)
			expand(t, group_entries(t, e & ~VZ_LPM_GROUP), 0,
			       GROUP_ENTRIES, leaf, depth);
		else if (!e || t->depth[vz_lpm_rule(t, e)] <= depth)
			store(&entries[i], leaf);
	}
}

/* ...and a deleted rule's addresses go to the one it uncovers. */
static void unexpand(struct vz_lpm *t, __u32 *entries, __u32 first, __u32 count,
		     __u32 leaf, __u32 repl)
{
	__u32 i, e;

	for (i = first; i < first + count; i++) {
		e = entries[i];
		if (e & VZ_LPM_GROUP)
			unexpand(t, group_entries(t, e & ~VZ_LPM_GROUP), 0,
				 GROUP_ENTRIES, leaf, repl);
		else if (e == leaf)
			store(&entries[i], repl);
	}
}

int vz_lpm_add(struct vz_lpm *t, const __u8 *addr, __u32 depth, __u32 rule)
{
	__u32 *entries = t->root, idx = vz_lpm_root_index(t, addr);
	__u32 bits = 8 * t->root_bytes, byte = t->root_bytes;
	__u32 need = 0, span, e;
	int err;

	if (depth > 8 * t->data_bytes || rule >= t->max_rules)
		return -EINVAL;
	/* A dry walk first: the groups this rule needs, so that nothing
	 * changes unless all of them can be had. */
	while (depth > bits) {
		e = entries[idx];
		if (!(e & VZ_LPM_GROUP)) {
			need = (depth - bits + 7) / 8;
			break;
		}
		entries = group_entries(t, e & ~VZ_LPM_GROUP);
		idx = addr[byte++];
		bits += 8;
	}
	err = groups_reserve(t, need);
	if (err)
		return err;

	t->depth[rule] = (__u16)depth;
	entries = t->root;
	idx = vz_lpm_root_index(t, addr);
	bits = 8 * t->root_bytes;
	byte = t->root_bytes;
	while (depth > bits) {
		e = entries[idx];
		if (!(e & VZ_LPM_GROUP)) {
			/* the new group starts as what the entry said */
			e = VZ_LPM_GROUP | group_take(t, e);
			store(&entries[idx], e);
		}
		entries = group_entries(t, e & ~VZ_LPM_GROUP);
		idx = addr[byte++];
		bits += 8;
	}
	span = 1u << (bits - depth);
	expand(t, entries, idx & ~(span - 1), span, leaf(t, rule), depth);
	return 0;
}

void vz_lpm_delete(struct vz_lpm *t, const __u8 *addr, __u32 depth, __u32 rule,
		   __u32 repl)
{
	__u32 *path[VZ_LPM_MAX_DATA]; /* entries naming the groups walked */
	__u32 *entries = t->root, idx = vz_lpm_root_index(t, addr);
	__u32 bits = 8 * t->root_bytes, byte = t->root_bytes;
	__u32 levels = 0, span, e, g;

	if (depth > 8 * t->data_bytes)
		return;
	while (depth > bits) {
		e = entries[idx];
		if (!(e & VZ_LPM_GROUP))
			return; /* not in the table: nothing is under it */
		path[levels++] = &entries[idx];
		entries = group_entries(t, e & ~VZ_LPM_GROUP);
		idx = addr[byte++];
		bits += 8;
	}
	span = 1u << (bits - depth);
	unexpand(t, entries, idx & ~(span - 1), span, leaf(t, rule),
		 leaf(t, repl));

	/*
	 * Groups on the way down may now have no deeper rule under them: all
	 * 256 entries equal. The parent takes that word first, so a reader
	 * never finds a freed group in the table, only on its way through one.
	 */
	while (levels--) {
		g = *path[levels] & ~VZ_LPM_GROUP;
		entries = group_entries(t, g);
		if (!group_uniform(entries))
			break;
		store(path[levels], entries[0]);
		t->free_groups[t->nfree++] = g;
	}
}

/*
 * vz_map_lookup_lpm4()'s first level for every LPM map that is not an IPv4
 * one: indexed like an IPv4 map's (2^24 entries, by an address's top 24
 * bits, no check on the lookup's path), every entry VZ_LPM_GROUP, which
 * sends the lookup off its path, where the map is checked. 64 MiB of
 * address space but 2 MiB of memory: one 2 MiB memfd of such entries,
 * mapped read-only 32 times side by side, once per process. NULL if that
 * cannot be had.
 */
#define LPM4_ELSEWHERE_PIECE HUGE_PAGE
#define LPM4_ELSEWHERE_SIZE ((sizeof(__u32)) << 24)

static const __u32 *lpm4_elsewhere_root;
static pthread_once_t lpm4_elsewhere_once = PTHREAD_ONCE_INIT;

static void lpm4_elsewhere_make(void)
{
	__u8 *area;
	__u32 *piece, i;
	int fd = memfd_create("veloz-lpm4-elsewhere", MFD_CLOEXEC);

	if (fd < 0)
		return;
	if (ftruncate(fd, LPM4_ELSEWHERE_PIECE))
		goto out;
	piece = mmap(NULL, LPM4_ELSEWHERE_PIECE, PROT_READ | PROT_WRITE,
		     MAP_SHARED, fd, 0);
	if (piece == MAP_FAILED)
		goto out;
	for (i = 0; i < LPM4_ELSEWHERE_PIECE / sizeof(__u32); i++)
		piece[i] = VZ_LPM_GROUP;
	munmap(piece, LPM4_ELSEWHERE_PIECE);
	/* the address range first, then the pieces over it */
	area = mmap(NULL, LPM4_ELSEWHERE_SIZE, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		goto out;
	for (i = 0; i < LPM4_ELSEWHERE_SIZE / LPM4_ELSEWHERE_PIECE; i++)
		if (mmap(area + (size_t)i * LPM4_ELSEWHERE_PIECE,
			 LPM4_ELSEWHERE_PIECE, PROT_READ,
			 MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
			munmap(area, LPM4_ELSEWHERE_SIZE);
			goto out;
		}
	lpm4_elsewhere_root = (const __u32 *)area;
out:
	close(fd);
}

const __u32 *vz_lpm4_elsewhere(void)
{
	pthread_once(&lpm4_elsewhere_once, lpm4_elsewhere_make);
	return lpm4_elsewhere_root;
}
