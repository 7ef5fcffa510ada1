// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench's NF side: two LPM maps declared as an NF declares them
 * (VZ_LPM, nf.h) and looked up as an NF looks them up (vz_map_lookup() on
 * a key built on the stack, the value read), so that what is timed is the
 * NF-facing path the native build compiles, not the bare trie. This file
 * includes nothing of DPDK: lpm_lookup.c holds the rest.
 */
#include <veloz/nf.h>

#include "lpm_nf.h"

VZ_LPM(bench_routes4, struct vz_lpm4_key, struct vz_route, BENCH_ROUTES4);
VZ_LPM(bench_routes6, struct vz_lpm6_key, struct vz_route, BENCH_ROUTES6);

struct vz_map *bench_map4(void)
{
	return &bench_routes4.map;
}

struct vz_map *bench_map6(void)
{
	return &bench_routes6.map;
}

__u32 bench_route4(__u32 addr_be)
{
	struct vz_lpm4_key key = { .prefixlen = 32 };
	struct vz_route *r;

	memcpy(key.addr, &addr_be, sizeof(key.addr));
	r = vz_map_lookup(&bench_routes4, &key);
	return r ? r->nexthop : BENCH_NONE;
}

__u32 bench_route6(const __u8 *addr)
{
	struct vz_lpm6_key key = { .prefixlen = 128 };
	struct vz_route *r;

	memcpy(key.addr, addr, sizeof(key.addr));
	r = vz_map_lookup(&bench_routes6, &key);
	return r ? r->nexthop : BENCH_NONE;
}

/* The next hops a bulk lookup gives for the first n (a multiple of
 * BENCH_BURST) addresses: the bench checks them against rte's too. */
void bench_route4_bulk(const __u32 *addrs_be, __u32 n, __u32 *nexthops)
{
	struct vz_lpm4_key keys[BENCH_BURST];
	struct vz_route *r[BENCH_BURST];
	__u32 i, j;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		for (j = 0; j < BENCH_BURST; j++) {
			keys[j].prefixlen = 32;
			memcpy(keys[j].addr, &addrs_be[i + j],
			       sizeof(keys[j].addr));
		}
		vz_map_lookup_lpm_bulk(&bench_routes4.map, keys, (void **)r,
				       BENCH_BURST);
		for (j = 0; j < BENCH_BURST; j++)
			nexthops[i + j] = r[j] ? r[j]->nexthop : BENCH_NONE;
	}
}

void bench_route6_bulk(const __u8 (*addrs)[16], __u32 n, __u32 *nexthops)
{
	struct vz_lpm6_key keys[BENCH_BURST];
	struct vz_route *r[BENCH_BURST];
	__u32 i, j;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		for (j = 0; j < BENCH_BURST; j++) {
			keys[j].prefixlen = 128;
			memcpy(keys[j].addr, addrs[i + j],
			       sizeof(keys[j].addr));
		}
		vz_map_lookup_lpm_bulk(&bench_routes6.map, keys, (void **)r,
				       BENCH_BURST);
		for (j = 0; j < BENCH_BURST; j++)
			nexthops[i + j] = r[j] ? r[j]->nexthop : BENCH_NONE;
	}
}

/*
 * The timed loops: n lookups over keys[i & mask]. With read, the route
 * each one finds is read and its next hop summed, as the router does;
 * without, only the pointer is kept (summed, so that no lookup can be
 * left out): the lookup alone, what rte_lpm_lookup() does.
 */
static inline __attribute__((always_inline)) __u64
lookups4(const __u32 *addrs_be, __u64 n, __u64 mask, const int read)
{
	struct vz_lpm4_key key = { .prefixlen = 32 };
	struct vz_route *r;
	__u64 i, sum = 0;

	for (i = 0; i < n; i++) {
		memcpy(key.addr, &addrs_be[i & mask], sizeof(key.addr));
		r = vz_map_lookup(&bench_routes4, &key);
		if (read) {
			if (r)
				sum += r->nexthop;
		} else {
			sum += (__u64)(unsigned long)r;
		}
	}
	return sum;
}

static inline __attribute__((always_inline)) __u64
lookups6(const __u8 (*addrs)[16], __u64 n, __u64 mask, const int read)
{
	struct vz_lpm6_key key = { .prefixlen = 128 };
	struct vz_route *r;
	__u64 i, sum = 0;

	for (i = 0; i < n; i++) {
		memcpy(key.addr, addrs[i & mask], sizeof(key.addr));
		r = vz_map_lookup(&bench_routes6, &key);
		if (read) {
			if (r)
				sum += r->nexthop;
		} else {
			sum += (__u64)(unsigned long)r;
		}
	}
	return sum;
}

/*
 * The same through vz_map_lookup_lpm_bulk(), BENCH_BURST keys at a time,
 * each burst's keys built on the stack first (as an NF's burst would be,
 * from its packets): the bulk call rte_lpm_lookup_bulk() is timed against.
 */
static inline __attribute__((always_inline)) __u64
bulk4(const __u32 *addrs_be, __u64 n, __u64 mask, const int read)
{
	struct vz_lpm4_key keys[BENCH_BURST];
	struct vz_route *r[BENCH_BURST];
	__u64 i, sum = 0;
	__u32 j;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		for (j = 0; j < BENCH_BURST; j++) {
			keys[j].prefixlen = 32;
			memcpy(keys[j].addr, &addrs_be[(i + j) & mask],
			       sizeof(keys[j].addr));
		}
		vz_map_lookup_lpm_bulk(&bench_routes4.map, keys, (void **)r,
				       BENCH_BURST);
		for (j = 0; j < BENCH_BURST; j++) {
			if (read) {
				if (r[j])
					sum += r[j]->nexthop;
			} else {
				sum += (__u64)(unsigned long)r[j];
			}
		}
	}
	return sum;
}

static inline __attribute__((always_inline)) __u64
bulk6(const __u8 (*addrs)[16], __u64 n, __u64 mask, const int read)
{
	struct vz_lpm6_key keys[BENCH_BURST];
	struct vz_route *r[BENCH_BURST];
	__u64 i, sum = 0;
	__u32 j;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		for (j = 0; j < BENCH_BURST; j++) {
			keys[j].prefixlen = 128;
			memcpy(keys[j].addr, addrs[(i + j) & mask],
			       sizeof(keys[j].addr));
		}
		vz_map_lookup_lpm_bulk(&bench_routes6.map, keys, (void **)r,
				       BENCH_BURST);
		for (j = 0; j < BENCH_BURST; j++) {
			if (read) {
				if (r[j])
					sum += r[j]->nexthop;
			} else {
				sum += (__u64)(unsigned long)r[j];
			}
		}
	}
	return sum;
}

__u64 bench_bulk4(const __u32 *addrs_be, __u64 n, __u64 mask, int read)
{
	return read ? bulk4(addrs_be, n, mask, 1) : bulk4(addrs_be, n, mask, 0);
}

__u64 bench_bulk6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read)
{
	return read ? bulk6(addrs, n, mask, 1) : bulk6(addrs, n, mask, 0);
}

__u64 bench_lookups4(const __u32 *addrs_be, __u64 n, __u64 mask, int read)
{
	return read ? lookups4(addrs_be, n, mask, 1)
		    : lookups4(addrs_be, n, mask, 0);
}

__u64 bench_lookups6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read)
{
	return read ? lookups6(addrs, n, mask, 1) : lookups6(addrs, n, mask, 0);
}
