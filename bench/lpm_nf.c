// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench's NF side: two LPM maps declared as an NF declares them
 * (VZ_LPM, nf.h) and looked up as an NF looks them up (IPv4:
 * vz_lpm_lookup4() on the address, as the router does, and vz_map_lookup()
 * on a key built on the stack; IPv6: vz_map_lookup()), the value read, so
 * that what is timed is the NF-facing path the native build compiles, not
 * the bare trie. This file
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
	struct vz_route *r = vz_lpm_lookup4(&bench_routes4, &addr_be);

	return r ? r->nexthop : BENCH_NONE;
}

__u32 bench_route4_key(__u32 addr_be)
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

/*
 * The timed loops: n lookups over keys[i & mask]. With read, the route
 * each one finds is read and its next hop summed, as the router does;
 * without, only the pointer is kept (summed, so that no lookup can be
 * left out): the lookup alone, what rte_lpm_lookup() does.
 */
static inline __attribute__((always_inline)) __u64
lookups4(const __u32 *addrs_be, __u64 n, __u64 mask, const int read)
{
	struct vz_route *r;
	__u64 i, sum = 0;

	for (i = 0; i < n; i++) {
		r = vz_lpm_lookup4(&bench_routes4, &addrs_be[i & mask]);
		if (read) {
			if (r)
				sum += r->nexthop;
		} else {
			sum += (__u64)(unsigned long)r;
		}
	}
	return sum;
}

/* The same through BPF's key struct: vz_map_lookup() on {32, addr}. */
static inline __attribute__((always_inline)) __u64
lookups4_key(const __u32 *addrs_be, __u64 n, __u64 mask, const int read)
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
 * One burst through vz_map_lookup_lpm_bulk(): BENCH_BURST keys built on
 * the stack from addresses i.. (as an NF's burst would be, from its
 * packets), the routes found into r[].
 */
static inline __attribute__((always_inline)) void
burst4(const __u32 *addrs_be, __u64 i, __u64 mask, struct vz_route **r)
{
	struct vz_lpm4_key keys[BENCH_BURST];
	__u32 j;

	for (j = 0; j < BENCH_BURST; j++) {
		keys[j].prefixlen = 32;
		memcpy(keys[j].addr, &addrs_be[(i + j) & mask],
		       sizeof(keys[j].addr));
	}
	vz_map_lookup_lpm_bulk(&bench_routes4.map, keys, (void **)r,
			       BENCH_BURST);
}

static inline __attribute__((always_inline)) void
burst6(const __u8 (*addrs)[16], __u64 i, __u64 mask, struct vz_route **r)
{
	struct vz_lpm6_key keys[BENCH_BURST];
	__u32 j;

	for (j = 0; j < BENCH_BURST; j++) {
		keys[j].prefixlen = 128;
		memcpy(keys[j].addr, addrs[(i + j) & mask],
		       sizeof(keys[j].addr));
	}
	vz_map_lookup_lpm_bulk(&bench_routes6.map, keys, (void **)r,
			       BENCH_BURST);
}

/* A burst's answers: next hops summed (read), or the pointers. */
static inline __attribute__((always_inline)) __u64
burst_sum(struct vz_route *const *r, const int read)
{
	__u64 sum = 0;
	__u32 j;

	for (j = 0; j < BENCH_BURST; j++)
		sum += read ? (r[j] ? r[j]->nexthop : 0)
			    : (__u64)(unsigned long)r[j];
	return sum;
}

/* The timed bulk loops: the bulk call rte_lpm_lookup_bulk() is timed
 * against, over the same keys as the loops above. */
__u64 bench_bulk4(const __u32 *addrs_be, __u64 n, __u64 mask, int read)
{
	struct vz_route *r[BENCH_BURST];
	__u64 i, sum = 0;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		burst4(addrs_be, i, mask, r);
		sum += read ? burst_sum(r, 1) : burst_sum(r, 0);
	}
	return sum;
}

__u64 bench_bulk6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read)
{
	struct vz_route *r[BENCH_BURST];
	__u64 i, sum = 0;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		burst6(addrs, i, mask, r);
		sum += read ? burst_sum(r, 1) : burst_sum(r, 0);
	}
	return sum;
}

/* The next hops (or BENCH_NONE) bulk lookups give for the first n
 * addresses, n a multiple of BENCH_BURST: checked against rte's too. */
static void hops(struct vz_route *const *r, __u32 *nexthops)
{
	__u32 j;

	for (j = 0; j < BENCH_BURST; j++)
		nexthops[j] = r[j] ? r[j]->nexthop : BENCH_NONE;
}

void bench_route4_bulk(const __u32 *addrs_be, __u32 n, __u32 *nexthops)
{
	struct vz_route *r[BENCH_BURST];
	__u32 i;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		burst4(addrs_be, i, ~0ull, r);
		hops(r, nexthops + i);
	}
}

void bench_route6_bulk(const __u8 (*addrs)[16], __u32 n, __u32 *nexthops)
{
	struct vz_route *r[BENCH_BURST];
	__u32 i;

	for (i = 0; i + BENCH_BURST <= n; i += BENCH_BURST) {
		burst6(addrs, i, ~0ull, r);
		hops(r, nexthops + i);
	}
}

__u64 bench_lookups4(const __u32 *addrs_be, __u64 n, __u64 mask, int read)
{
	return read ? lookups4(addrs_be, n, mask, 1)
		    : lookups4(addrs_be, n, mask, 0);
}

__u64 bench_lookups4_key(const __u32 *addrs_be, __u64 n, __u64 mask, int read)
{
	return read ? lookups4_key(addrs_be, n, mask, 1)
		    : lookups4_key(addrs_be, n, mask, 0);
}

__u64 bench_lookups6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read)
{
	return read ? lookups6(addrs, n, mask, 1) : lookups6(addrs, n, mask, 0);
}
