// SPDX-License-Identifier: BSD-2-Clause
/*
 * The typed LPM fast path (nf.h: vz_map_lookup() on a VZ_LPM map inlines
 * the trie walk) against the generic path (vz_map_lookup_slow(), what every
 * other map type takes) and against a reference that scans every rule: the
 * same answers on random nested tables, IPv4 and IPv6 (a small table with
 * a 16-bit first level and a full-size one with a 24-bit first level), as
 * rules are added, replaced and deleted. Also: a key whose prefixlen is
 * shorter than the address still gets BPF's answer, vz_lpm_lookup4() (by
 * address) gives a full-length key's answer, the update and delete
 * macros work on the typed maps, and bpf_map_lookup_elem() is the same call.
 *
 * VZ_TEST_SEED=n replays a run; a failure prints the seed.
 */
#include <veloz/nf.h>

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

VZ_LPM(typed4, struct vz_lpm4_key, struct vz_route, 4096);
VZ_LPM(typed6, struct vz_lpm6_key, struct vz_route, 1024);
VZ_LPM(typed6_full, struct vz_lpm6_key, struct vz_route, 1 << 17);
/* A value of 24 bytes: a stride of three leaf units, which is how far apart
 * the trie's leaves are (lpm.h), and not a power of two. */
struct wide_route {
	struct vz_route route;
	__u32 tag[4];
};
VZ_LPM(typed4_wide, struct vz_lpm4_key, struct wide_route, 4096);
VZ_LPM(typed6_wide, struct vz_lpm6_key, struct wide_route, 1024);
VZ_HASH(plain_hash, __u32, __u32, 16);

/* The typed path is chosen at compile time, by the map's type. */
_Static_assert(_Generic(&typed4, struct vz_lpm_map * : 1, default : 0),
	       "VZ_LPM maps have their own type in the native build");
_Static_assert(_Generic(&plain_hash, struct vz_map * : 1, default : 0),
	       "other maps stay struct vz_map");

#define RULES 600
#define PROBES 20000

static __u64 rng_state;

static __u64 rnd(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct rule {
	__u32 plen;
	__u8 addr[16];
	__u32 nexthop;
	int live;
};

static struct rule rules[RULES];

static void mask(__u8 *a, __u32 bytes, __u32 plen)
{
	__u32 i;

	for (i = 0; i < bytes; i++) {
		if (plen >= (i + 1) * 8)
			continue;
		a[i] = plen <= i * 8
			       ? 0
			       : a[i] & (__u8)(0xff << (8 - (plen - i * 8)));
	}
}

static int covers(const struct rule *r, const __u8 *a, __u32 bytes,
		  __u32 maxlen)
{
	__u8 m[16];

	if (!r->live || r->plen > maxlen)
		return 0;
	memcpy(m, a, bytes);
	mask(m, bytes, r->plen);
	return !memcmp(m, r->addr, bytes);
}

/* The reference: the longest live rule no longer than maxlen covering a. */
static const struct rule *ref(const __u8 *a, __u32 bytes, __u32 maxlen)
{
	const struct rule *best = NULL;
	int i;

	for (i = 0; i < RULES; i++)
		if (covers(&rules[i], a, bytes, maxlen) &&
		    (!best || rules[i].plen > best->plen))
			best = &rules[i];
	return best;
}

/* Another live rule with r's prefix. */
static int find(const struct rule *r, __u32 bytes)
{
	int i;

	for (i = 0; i < RULES; i++)
		if (&rules[i] != r && rules[i].live &&
		    rules[i].plen == r->plen &&
		    !memcmp(rules[i].addr, r->addr, bytes))
			return 1;
	return 0;
}

/* An address near one of a few bases, so that rules nest and overlap. */
static void draw(__u8 *a, __u32 bytes, const __u8 bases[4][16])
{
	__u32 keep = (__u32)(rnd() % (8 * bytes + 1)), i;

	memcpy(a, bases[rnd() % 4], bytes);
	for (i = 0; i < bytes; i++) {
		__u8 r = (__u8)rnd();

		if (keep >= (i + 1) * 8)
			continue;
		a[i] = keep <= i * 8 ? r
				     : (__u8)((a[i] &
					       (0xff << (8 - (keep - i * 8)))) |
					      (r & (0xff >> (keep - i * 8))));
	}
}

/* Either family's key: a 4-byte map reads the first 8 bytes of it. */
struct anykey {
	__u32 prefixlen;
	__u8 addr[16];
};

static unsigned long long seed = 0x1a2b3c4d;

/* Add (or replace) rules at random, or, after the first step, delete. */
static void churn(struct vz_lpm_map *m, __u32 bytes, const __u8 bases[4][16],
		  int step)
{
	struct anykey key;
	struct wide_route v; /* as big as any map's value here */
	struct rule *r;
	int i, err;

	for (i = 0; i < RULES; i++) {
		r = &rules[i];
		if (step && r->live && rnd() % 3 == 0) {
			key.prefixlen = r->plen;
			memcpy(key.addr, r->addr, bytes);
			err = vz_map_delete(m, &key);
			CHECK(!err, "%s: delete: %d", m->map.name, err);
			r->live = 0;
			continue;
		}
		if (r->live && rnd() % 2)
			continue;
		if (!r->live) {
			draw(r->addr, bytes, bases);
			r->plen = (__u32)(rnd() % (8 * bytes + 1));
			mask(r->addr, bytes, r->plen);
			if (find(r, bytes))
				continue; /* another rule has it */
		}
		r->nexthop = (__u32)rnd();
		r->live = 1;
		key.prefixlen = r->plen;
		memcpy(key.addr, r->addr, bytes);
		v = (struct wide_route){
			.route = { .kind = 1, .nexthop = r->nexthop },
			.tag = { r->nexthop, ~r->nexthop, r->plen, 0 },
		};
		err = vz_map_update(m, &key, &v, BPF_ANY);
		CHECK(!err, "%s: update: %d", m->map.name, err);
	}
}

/* Keys per bulk call: not a multiple of the keys a pass takes, so its
 * head, its middle and its tail are all exercised. */
#define BULK (VZ_LPM_BULK * 2 + 3)

/*
 * vz_map_lookup_lpm_bulk() against one vz_map_lookup() per key, on a burst
 * packed map->key_size bytes apart as the call takes it, full-length and
 * shorter prefixlens mixed: the count of answers that differ.
 */
static int bulk_wrong(struct vz_lpm_map *m, __u32 bytes,
		      const __u8 bases[4][16])
{
	__u8 burst[BULK * sizeof(struct anykey)];
	void *got[BULK + 1];
	size_t ks = m->map.key_size;
	struct anykey key;
	int i, bad = 0;

	for (i = 0; i < BULK; i++) {
		key.prefixlen =
			i % 5 ? 8 * bytes : (__u32)(rnd() % (8 * bytes + 1));
		draw(key.addr, bytes, bases);
		memcpy(burst + i * ks, &key, ks);
	}
	got[BULK] = &got; /* past n: must stay untouched */
	vz_map_lookup_lpm_bulk(&m->map, burst, got, BULK);
	for (i = 0; i < BULK; i++) {
		memcpy(&key, burst + i * ks, ks);
		bad += got[i] != vz_map_lookup(m, &key);
	}
	return bad + (got[BULK] != &got);
}

/* One random table on m, through the typed macros, checked at each step. */
static void run(struct vz_lpm_map *m, __u32 bytes, __u32 root_bytes)
{
	struct vz_route *typed, *generic;
	const struct rule *want;
	__u8 bases[4][16], a[16];
	struct anykey key;
	int i, step, bad;

	if (vz_map_init(&m->map, 1)) {
		CHECK(0, "%s: init", m->map.name);
		return;
	}
	CHECK(m->map.lpm->root_bytes == root_bytes,
	      "%s: first level of %u bytes, not %u", m->map.name,
	      m->map.lpm->root_bytes, root_bytes);
	memset(rules, 0, sizeof(rules));
	for (i = 0; i < 4; i++)
		for (step = 0; step < 16; step++)
			bases[i][step] = (__u8)rnd();
	for (step = 0; step < 3; step++) {
		churn(m, bytes, bases, step);
		bad = 0;
		for (i = 0; i < PROBES; i++) {
			draw(a, bytes, bases);
			/* mostly full-length keys (an NF's), some shorter */
			key.prefixlen =
				i % 8 ? 8 * bytes
				      : (__u32)(rnd() % (8 * bytes + 1));
			memcpy(key.addr, a, bytes);
			typed = vz_map_lookup(m, &key);
			generic = vz_map_lookup_slow(&m->map, &key);
			want = ref(a, bytes, key.prefixlen);
			if (typed != generic ||
			    (want ? !typed || typed->nexthop != want->nexthop
				  : typed != NULL))
				bad++;
			if (bpf_map_lookup_elem(m, &key) != typed)
				bad++;
			/* IPv4 by address: a full-length key's answer; any
			 * other map's lookup4 answers nothing */
			if (key.prefixlen == 8 * bytes &&
			    vz_lpm_lookup4(m, a) != (bytes == 4 ? typed : NULL))
				bad++;
		}
		CHECK(!bad, "%s: step %d: %d of %d answers wrong (seed %llu)",
		      m->map.name, step, bad, PROBES, seed);
		for (i = bad = 0; i < PROBES / BULK; i++)
			bad += bulk_wrong(m, bytes, bases);
		CHECK(!bad, "%s: step %d: bulk: %d answers wrong (seed %llu)",
		      m->map.name, step, bad, seed);
	}
	vz_map_free(&m->map);
	CHECK(vz_map_lookup(m, &key) == NULL, "%s: a freed map answers nothing",
	      m->map.name);
	CHECK(vz_lpm_lookup4(m, a) == NULL,
	      "%s: a freed map answers nothing by address", m->map.name);
	CHECK(!bulk_wrong(m, bytes, bases), "%s: a freed map's bulk lookups",
	      m->map.name);
}

int main(void)
{
	const char *s = getenv("VZ_TEST_SEED");

	if (s)
		seed = strtoull(s, NULL, 0);
	rng_state = seed;
	run(&typed4, 4, 3);
	/* a small IPv6 table indexes 16 bits first, a full-size one 24 */
	run(&typed6, 16, 2);
	run(&typed6_full, 16, 3);
	run(&typed4_wide, 4, 3);
	run(&typed6_wide, 16, 2);
	if (failures)
		fprintf(stderr, "test-lpm-typed: %d failures (seed %llu)\n",
			failures, seed);
	return failures != 0;
}
