/* SPDX-License-Identifier: BSD-2-Clause */
/* vz-lpm-bench: the NF-side half (lpm_nf.c), callable without nf.h. */
#ifndef VZ_BENCH_LPM_NF_H
#define VZ_BENCH_LPM_NF_H

#include <linux/types.h>
#include <veloz/maps.h>

#define BENCH_ROUTES4 (1u << 20)
#define BENCH_ROUTES6 (1u << 18)
#define BENCH_NONE 0xffffffffu
#define BENCH_BURST 32 /* keys per bulk call, both libraries */

struct vz_map *bench_map4(void);
struct vz_map *bench_map6(void);
/* One lookup: the route's nexthop or BENCH_NONE. IPv4 through
 * vz_lpm_lookup4() (_key: vz_map_lookup() on a key struct), IPv6 through
 * vz_map_lookup(). */
__u32 bench_route4(__u32 addr_be);
__u32 bench_route4_key(__u32 addr_be);
__u32 bench_route6(const __u8 *addr);
/* The same for n addresses (a multiple of BENCH_BURST), through
 * vz_map_lookup_lpm_bulk(): each next hop or BENCH_NONE. */
void bench_route4_bulk(const __u32 *addrs_be, __u32 n, __u32 *nexthops);
void bench_route6_bulk(const __u8 (*addrs)[16], __u32 n, __u32 *nexthops);
/* n lookups over keys[i & mask]; read: the route found is read too. */
__u64 bench_lookups4(const __u32 *addrs_be, __u64 n, __u64 mask, int read);
__u64 bench_lookups4_key(const __u32 *addrs_be, __u64 n, __u64 mask, int read);
__u64 bench_lookups6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read);
/* The same through vz_map_lookup_lpm_bulk(), BENCH_BURST keys a call. */
__u64 bench_bulk4(const __u32 *addrs_be, __u64 n, __u64 mask, int read);
__u64 bench_bulk6(const __u8 (*addrs)[16], __u64 n, __u64 mask, int read);

#endif
