/* SPDX-License-Identifier: BSD-2-Clause */
/* vz-lpm-bench's synthetic IPv4 and IPv6 tables (lpm_tables.c). */
#ifndef VZ_BENCH_LPM_TABLES_H
#define VZ_BENCH_LPM_TABLES_H

#include <linux/types.h>

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

#endif
