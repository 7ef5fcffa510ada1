/* SPDX-License-Identifier: BSD-2-Clause */
/* vz-lpm-bench's synthetic IPv4 and IPv6 tables (lpm_tables.c). */
#ifndef VZ_BENCH_LPM_TABLES_H
#define VZ_BENCH_LPM_TABLES_H

#include <linux/types.h>

struct vz_map;
struct rte_lpm;
struct rte_lpm6;

struct prefix6 {
	__u8 addr[16];
	__u32 plen;
};

/* The generator's state: the seed, before anything is drawn. */
extern __u64 rng_state;
/* The next of the seeded sequence (splitmix64). */
__u64 rnd(void);
/* Random bits into a[] from bit `from` on; the bits before it kept. */
void rand_bits(__u8 *a, __u32 from);
/* n distinct IPv4 prefixes (host order): how many it made (0: no memory). */
__u32 make4(__u32 *addr, __u8 *plen, __u32 n);
/* n distinct IPv6 prefixes, a fifth allocations, the rest under them. */
__u32 make6(struct prefix6 *pf, __u32 n);

/*
 * A prefix added to (with next hop nh) or deleted from one library's table:
 * which 0 is veloz's map m, 1 DPDK's r. 0, or the library's error.
 */
int v4_add(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p, __u32 nh,
	   int which);
int v4_del(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p, int which);
int v6_add(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
	   __u32 nh, int which);
int v6_del(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
	   int which);
/*
 * Every one of the n prefixes out of one library's IPv6 table (untimed),
 * then all back in, timed: the seconds the adds took, or -1. A reload on
 * memory the first load touched, where the first load's time counts this
 * VM's first touch of veloz's pages (rte's were touched by EAL's init).
 */
double v6_reload(struct vz_map *m, struct rte_lpm6 *r, const struct prefix6 *pf,
		 __u32 n, int which);

#endif
