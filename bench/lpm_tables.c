// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench's tables: N IPv4 prefixes with a BGP-like mix of lengths
 * (mostly /24s, some longer than /24 so second-level groups are used too),
 * and M IPv6 prefixes shaped like a global table (allocations of /29../32
 * inside the RIRs' blocks, more-specifics down to /48 under them), all
 * distinct, from one seeded generator (splitmix64) so a seed gives the
 * same tables and keys in every run; and a prefix added to or deleted from
 * either library's table, veloz's map or DPDK's rte_lpm/rte_lpm6.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rte_lpm.h>
#include <rte_lpm6.h>

#include <veloz/abi.h>
#include <veloz/maps.h>

#include "common/clock.h"
#include "lpm_tables.h"

__u64 rng_state;

__u64 rnd(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* IPv4 prefix lengths per mille, roughly a 2024 full table, plus a few
 * longer than /24 (common inside networks) so groups are used too. */
static const struct {
	__u32 plen, permille;
} lengths4[] = {
	{ 8, 1 },   { 10, 1 },	 { 12, 1 },  { 14, 1 },	  { 15, 1 },
	{ 16, 14 }, { 17, 8 },	 { 18, 13 }, { 19, 25 },  { 20, 40 },
	{ 21, 45 }, { 22, 120 }, { 23, 85 }, { 24, 640 }, { 25, 1 },
	{ 26, 1 },  { 28, 1 },	 { 30, 1 },  { 32, 1 },
};

/* IPv6 more-specifics under an allocation, per mille (after RIPE's
 * 2024 table: /48 about half, then /44, /40, /36...). */
static const struct {
	__u32 plen, permille;
} lengths6[] = {
	{ 33, 10 }, { 34, 10 },	 { 35, 10 },  { 36, 50 }, { 38, 20 },
	{ 40, 90 }, { 42, 30 },	 { 44, 110 }, { 45, 20 }, { 46, 40 },
	{ 47, 30 }, { 48, 560 }, { 56, 10 },  { 64, 10 },
};

/* The RIRs' big IPv6 blocks: where allocations are drawn from. */
static const __u16 blocks6[] = {
	0x2001, 0x2400, 0x2600, 0x2800, 0x2a00, 0x2c00
};

static __u32 pick(const void *table, size_t entries)
{
	const __u32(*t)[2] = table;
	__u32 r = (__u32)(rnd() % 1000);
	size_t i;

	for (i = 0; i < entries; i++) {
		if (r < t[i][1])
			return t[i][0];
		r -= t[i][1];
	}
	return t[entries - 1][0];
}

static void mask6(__u8 *a, __u32 plen)
{
	__u32 i;

	for (i = 0; i < 16; i++) {
		if (plen >= (i + 1) * 8)
			continue;
		a[i] = plen <= i * 8
			       ? 0
			       : a[i] & (__u8)(0xff << (8 - (plen - i * 8)));
	}
}

void rand_bits(__u8 *a, __u32 from) /* bits from `from` on */
{
	__u8 r[16];
	__u64 x = rnd(), y = rnd();
	__u32 i;

	memcpy(r, &x, 8);
	memcpy(r + 8, &y, 8);
	for (i = 0; i < 16; i++) {
		if (from >= (i + 1) * 8)
			continue;
		if (from <= i * 8)
			a[i] = r[i];
		else
			a[i] |= r[i] & (__u8)(0xff >> (from - i * 8));
	}
}

/* Distinct prefixes: a hash set of what was drawn. */
static int seen_add(__u64 *set, __u64 mask, __u64 h)
{
	__u64 i = h & mask;

	h |= 1; /* 0 is empty */
	for (; set[i]; i = (i + 1) & mask)
		if (set[i] == h)
			return 0;
	set[i] = h;
	return 1;
}

static __u64 hash6(const __u8 *a, __u32 plen)
{
	__u64 x, y;

	memcpy(&x, a, 8);
	memcpy(&y, a + 8, 8);
	return (x * 0x9e3779b97f4a7c15ull) ^ (y * 0xc2b2ae3d27d4eb4full) ^
	       ((__u64)plen * 0x165667b19e3779f9ull);
}

__u32 make4(__u32 *addr, __u8 *plen, __u32 n)
{
	__u64 cap = 1, *set;
	__u32 got = 0, tries = 0, a, p;

	while (cap < 2ull * n)
		cap <<= 1;
	set = calloc(cap, sizeof(*set));
	if (!set)
		return 0;
	while (got < n && tries++ < 8 * n) {
		p = pick(lengths4, sizeof(lengths4) / sizeof(lengths4[0]));
		a = (__u32)rnd() & (~0u << (32 - p));
		if (!seen_add(set, cap - 1,
			      ((__u64)a << 6 | p) * 0x9e3779b97f4a7c15ull))
			continue;
		addr[got] = a;
		plen[got++] = (__u8)p;
	}
	free(set);
	return got;
}

__u32 make6(struct prefix6 *pf, __u32 n)
{
	__u32 roots = n / 5 ? n / 5 : 1, got = 0, tries = 0, p;
	__u64 cap = 1, *set;
	struct prefix6 x;

	while (cap < 2ull * n)
		cap <<= 1;
	set = calloc(cap, sizeof(*set));
	if (!set)
		return 0;
	while (got < n && tries++ < 8 * n) {
		memset(&x, 0, sizeof(x));
		if (got < roots) {
			/* an allocation: /29../32 inside a RIR's block */
			__u16 b = blocks6[rnd() % (sizeof(blocks6) /
						   sizeof(blocks6[0]))];

			x.addr[0] = (__u8)(b >> 8);
			x.addr[1] = (__u8)b;
			rand_bits(x.addr, b == 0x2001 ? 16 : 12);
			x.plen = 29 + (__u32)(rnd() % 4);
		} else {
			/* a more-specific under one of them */
			x = pf[rnd() % roots];
			p = pick(lengths6,
				 sizeof(lengths6) / sizeof(lengths6[0]));
			if (p <= x.plen)
				p = x.plen + 1;
			rand_bits(x.addr, x.plen);
			x.plen = p;
		}
		mask6(x.addr, x.plen);
		if (!seen_add(set, cap - 1, hash6(x.addr, x.plen)))
			continue;
		pf[got++] = x;
	}
	free(set);
	return got;
}

/* ---- either library ------------------------------------------------------ */

int v4_add(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p, __u32 nh,
	   int which)
{
	struct vz_lpm4_key key = { .prefixlen = p };
	struct vz_route val = { .kind = 1, .nexthop = nh };
	__u32 be = htobe32(a);

	if (which == 0) {
		memcpy(key.addr, &be, 4);
		return vz_map_update_elem(m, &key, &val, BPF_ANY);
	}
	return rte_lpm_add(r, a, (__u8)p, nh);
}

int v4_del(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p, int which)
{
	struct vz_lpm4_key key = { .prefixlen = p };
	__u32 be = htobe32(a);

	if (which == 0) {
		memcpy(key.addr, &be, 4);
		return vz_map_delete_elem(m, &key);
	}
	return rte_lpm_delete(r, a, (__u8)p);
}

int v6_add(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
	   __u32 nh, int which)
{
	struct vz_lpm6_key key = { .prefixlen = pf->plen };
	struct vz_route val = { .kind = 1, .nexthop = nh };

	if (which == 0) {
		memcpy(key.addr, pf->addr, 16);
		return vz_map_update_elem(m, &key, &val, BPF_ANY);
	}
	return rte_lpm6_add(r, pf->addr, (__u8)pf->plen, nh);
}

int v6_del(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
	   int which)
{
	struct vz_lpm6_key key = { .prefixlen = pf->plen };

	if (which == 0) {
		memcpy(key.addr, pf->addr, 16);
		return vz_map_delete_elem(m, &key);
	}
	return rte_lpm6_delete(r, pf->addr, (__u8)pf->plen);
}

double v6_reload(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
		 __u32 n, int which)
{
	double t0;
	__u32 i;

	for (i = 0; i < n; i++)
		if (v6_del(m, r, &pf[i], which))
			return -1;
	t0 = vz_now_s();
	for (i = 0; i < n; i++)
		if (v6_add(m, r, &pf[i], i, which))
			return -1;
	return vz_now_s() - t0;
}
