// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench: veloz's native LPM maps beside DPDK's rte_lpm and rte_lpm6,
 * in one process, on the same tables and the same keys.
 *
 * Tables: N IPv4 prefixes with a BGP-like mix of lengths (mostly /24s,
 * some longer than /24 so second-level groups are used too), and M IPv6
 * prefixes shaped like a global table (allocations of /29../32 inside the
 * RIRs' blocks, more-specifics down to /48 under them). Neither has a
 * default route (rte_lpm takes depths 1..32 only). Each rule's next hop is
 * its index, in both libraries, so every answer can be compared.
 *
 * veloz is looked up as an NF looks it up: vz_map_lookup() on a VZ_LPM map
 * (lpm_nf.c, through nf.h's typed fast path), a key built on the stack,
 * the value read. rte_lpm by rte_lpm_lookup() and rte_lpm_lookup_bulk()
 * (bursts of 32); rte_lpm6 by rte_lpm6_lookup() and
 * rte_lpm6_lookup_bulk_func().
 *
 * Keys: "uniform" addresses drawn uniformly (IPv4: the whole space; IPv6:
 * 2000::/3, the space the table lives in: over all of ::/0, 7 keys in 8
 * would be answered "no route" by either library's first level), and
 * "routed" addresses inside random prefixes of the table.
 *
 * Every measure is repeated -t times (default 7), the libraries
 * interleaved inside each trial; the medians and the ratios of medians are
 * printed (veloz / DPDK: above 1.0 veloz is faster). Updates and deletes:
 * each trial deletes a random hundredth of the table and adds it back, timed,
 * in both libraries; the first load is timed once. Memory: the process's
 * RSS growth while each table is built (DPDK's memory is mmap()ed up front
 * by EAL but counted as it is touched), and what is in huge pages.
 *
 * Pages: veloz's first level asks for transparent huge pages; DPDK's
 * tables are on huge pages when enough 2 MiB pages are reserved
 * (vm.nr_hugepages: EAL runs --in-memory on them), else on 4 KiB pages
 * (--no-huge, whose memory is a shmem memfd THP does not back), which
 * makes rte_lpm's random lookups miss the TLB: the output says which, and
 * only the first is a comparison of the tables rather than of page sizes.
 *
 * A benchmark, not a test: it asserts nothing, except that both libraries
 * give the same answers (a mismatch is reported and the exit status is 1).
 *
 *   vz-lpm-bench [-n V4PREFIXES] [-6 V6PREFIXES] [-l LOOKUPS] [-t TRIALS]
 *                [-s SEED] [-- EAL-ARGS]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_memory.h>

#include <veloz/abi.h>
#include <veloz/maps.h>

#include "bench_stats.h"
#include "lpm_nf.h"

#define KEYS (1u << 20) /* lookup keys made up front, then cycled */
#define BURST 32
#define MAX_TRIALS BENCH_MAX_TRIALS
/* What rte_lpm and rte_lpm6, as configured here, take: with fewer 2 MiB
 * pages free DPDK runs --no-huge, on 4 KiB pages (said in the output). */
#define HUGEPAGES_NEEDED 448

struct prefix6 {
	__u8 addr[16];
	__u32 plen;
};

static __u64 rng_state;

static __u64 rnd(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long status_kib(const char *file, const char *field)
{
	char line[256];
	size_t len = strlen(field);
	long kib = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len))
			kib = strtol(line + len, NULL, 10);
	fclose(f);
	return kib;
}

static long rss_kib(void)
{
	return status_kib("/proc/self/status", "VmRSS:");
}

/* ---- tables ----------------------------------------------------------------
 */

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

static void rand_bits(__u8 *a, __u32 from) /* bits from `from` on */
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

static __u32 make4(__u32 *addr, __u8 *plen, __u32 n)
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

static __u32 make6(struct prefix6 *pf, __u32 n)
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

/* ---- the two libraries ------------------------------------------------------
 */

static int v4_add(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p,
		  __u32 nh, int which)
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

static int v4_del(struct vz_map *m, struct rte_lpm *r, __u32 a, __u32 p,
		  int which)
{
	struct vz_lpm4_key key = { .prefixlen = p };
	__u32 be = htobe32(a);

	if (which == 0) {
		memcpy(key.addr, &be, 4);
		return vz_map_delete_elem(m, &key);
	}
	return rte_lpm_delete(r, a, (__u8)p);
}

static int v6_add(struct vz_map *m, struct rte_lpm6 *r,
		  const struct prefix6 *pf, __u32 nh, int which)
{
	struct vz_lpm6_key key = { .prefixlen = pf->plen };
	struct vz_route val = { .kind = 1, .nexthop = nh };

	if (which == 0) {
		memcpy(key.addr, pf->addr, 16);
		return vz_map_update_elem(m, &key, &val, BPF_ANY);
	}
	return rte_lpm6_add(r, pf->addr, (__u8)pf->plen, nh);
}

static int v6_del(struct vz_map *m, struct rte_lpm6 *r,
		  const struct prefix6 *pf, int which)
{
	struct vz_lpm6_key key = { .prefixlen = pf->plen };

	if (which == 0) {
		memcpy(key.addr, pf->addr, 16);
		return vz_map_delete_elem(m, &key);
	}
	return rte_lpm6_delete(r, pf->addr, (__u8)pf->plen);
}

/*
 * Timed loops: n lookups over keys[i & (KEYS - 1)], next hops summed. With
 * vals, each next hop indexes a route table shaped as veloz's values (one
 * struct vz_route per rule, on huge pages too) and the route is read: what
 * a DPDK router keeping per-route data does, and what an NF's lookup of a
 * map value is.
 */
static __u64 rte4_single(const struct rte_lpm *r, const __u32 *ips, __u64 n,
			 const struct vz_route *vals)
{
	__u64 i, sum = 0;
	__u32 nh;

	for (i = 0; i < n; i++)
		if (!rte_lpm_lookup(r, ips[i & (KEYS - 1)], &nh))
			sum += vals ? vals[nh].nexthop : nh;
	return sum;
}

static __u64 rte4_bulk(const struct rte_lpm *r, const __u32 *ips, __u64 n,
		       const struct vz_route *vals)
{
	__u32 hops[BURST];
	__u64 i, sum = 0;
	int j;

	for (i = 0; i + BURST <= n; i += BURST) {
		rte_lpm_lookup_bulk(r, ips + (i & (KEYS - 1)), hops, BURST);
		for (j = 0; j < BURST; j++)
			if (hops[j] & RTE_LPM_LOOKUP_SUCCESS)
				sum += vals ? vals[hops[j] & 0x00ffffff].nexthop
					    : hops[j] & 0x00ffffff;
	}
	return sum;
}

static __u64 rte6_single(const struct rte_lpm6 *r, const __u8 (*ips)[16],
			 __u64 n, const struct vz_route *vals)
{
	__u64 i, sum = 0;
	__u32 nh;

	for (i = 0; i < n; i++)
		if (!rte_lpm6_lookup(r, ips[i & (KEYS - 1)], &nh))
			sum += vals ? vals[nh].nexthop : nh;
	return sum;
}

static __u64 rte6_bulk(const struct rte_lpm6 *r, __u8 (*ips)[16], __u64 n,
		       const struct vz_route *vals)
{
	int32_t hops[BURST];
	__u64 i, sum = 0;
	int j;

	for (i = 0; i + BURST <= n; i += BURST) {
		rte_lpm6_lookup_bulk_func(r, ips + (i & (KEYS - 1)), hops,
					  BURST);
		for (j = 0; j < BURST; j++)
			if (hops[j] >= 0)
				sum += vals ? vals[hops[j]].nexthop
					    : (__u32)hops[j];
	}
	return sum;
}

/* A route table for rte's next hops, 2 MiB aligned on huge pages. */
static struct vz_route *route_table(__u32 n)
{
	size_t len = ((size_t)n * sizeof(struct vz_route) + (2u << 20) - 1) &
		     ~(size_t)((2u << 20) - 1);
	struct vz_route *vals = aligned_alloc(2u << 20, len);
	__u32 i;

	if (!vals)
		return NULL;
	madvise(vals, len, MADV_HUGEPAGE); /* a hint */
	for (i = 0; i < n; i++)
		vals[i] = (struct vz_route){ .kind = 1, .nexthop = i };
	return vals;
}

/* ---- measures
 * ---------------------------------------------------------------- */

/* Lookup measures: [family][keys][variant]. */
enum { V_VZ, V_RTE, V_RTEB, V_VZ_READ, V_RTE_READ, V_RTEB_READ, NVARIANTS };
#define LOOKUP(fam, mix, v) (((fam)*2 + (mix)) * NVARIANTS + (v))

enum {
	DEL4_VZ = LOOKUP(2, 0, 0),
	DEL4_RTE,
	ADD4_VZ,
	ADD4_RTE,
	DEL6_VZ,
	DEL6_RTE,
	ADD6_VZ,
	ADD6_RTE,
	NMEASURES
};

static double res[NMEASURES][MAX_TRIALS];
static volatile __u64 sink;

static int wrong;

/* Both libraries' answers for the first `n` keys must agree. */
static void compare4(struct rte_lpm *r, const __u32 *ips, const __u32 *be,
		     __u32 n, const char *when)
{
	__u32 i, a, b, bad = 0;

	for (i = 0; i < n; i++) {
		a = bench_route4(be[i]);
		if (rte_lpm_lookup(r, ips[i], &b))
			b = BENCH_NONE;
		bad += a != b;
	}
	if (bad) {
		printf("MISMATCH ipv4 %s: %u of %u answers differ\n", when, bad,
		       n);
		wrong = 1;
	}
}

static void compare6(struct rte_lpm6 *r, const __u8 (*ips)[16], __u32 n,
		     const char *when)
{
	__u32 i, a, b, bad = 0;

	for (i = 0; i < n; i++) {
		a = bench_route6(ips[i]);
		if (rte_lpm6_lookup(r, ips[i], &b))
			b = BENCH_NONE;
		bad += a != b;
	}
	if (bad) {
		printf("MISMATCH ipv6 %s: %u of %u answers differ\n", when, bad,
		       n);
		wrong = 1;
	}
}

static double mlps(__u64 n, double s)
{
	return (double)n / s / 1e6;
}

/* 2 MiB pages reserved and free: DPDK gets real huge pages then. */
static long free_hugepages(void)
{
	return status_kib("/proc/meminfo", "HugePages_Free:");
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-n V4PREFIXES] [-6 V6PREFIXES] [-l LOOKUPS] "
		"[-t TRIALS] [-s SEED] [-- EAL-ARGS]\n",
		argv0);
}

int main(int argc, char **argv)
{
	__u64 lookups = 10000000, seed = 1;
	__u32 n4 = 750000, n6 = 190000, i, j, t, trials = 7, ndel4, ndel6;
	/* huge pages: --in-memory on them; else --no-huge, which EAL will
	 * not combine with --in-memory (its legacy memory mode): no shared
	 * config files then either (--no-shconf) */
	char *eal_argv[32] = { argv[0],
			       "--no-pci",
			       "--no-telemetry",
			       "--log-level=error",
			       "--lcores=0@(0-1)",
			       "--in-memory",
			       "--no-huge",
			       "--no-shconf",
			       "-m",
			       "2048" };
	int eal_argc = 10, opt, err, nargs, huge;
	__u32 *addr4, *ips4, *be4, *rips4, *rbe4, *order4, *order6;
	__u8 *plen4, (*ips6)[16], (*rips6)[16];
	struct prefix6 *pf6;
	struct vz_route *rvals4, *rvals6;
	long hp0, hmem[4];
	struct vz_map *m4 = bench_map4(), *m6 = bench_map6();
	struct rte_lpm *r4;
	struct rte_lpm6 *r6;
	long rss0, mem[4];
	double t0, load[4];

	nargs = argc;
	for (i = 1; i < (__u32)argc; i++)
		if (!strcmp(argv[i], "--")) {
			nargs = (int)i;
			break;
		}
	while ((opt = getopt(nargs, argv, "n:6:l:t:s:h")) != -1) {
		switch (opt) {
		case 'n':
			n4 = (__u32)strtoul(optarg, NULL, 0);
			break;
		case '6':
			n6 = (__u32)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			lookups = strtoull(optarg, NULL, 0);
			break;
		case 't':
			trials = (__u32)strtoul(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (optind != nargs || n4 < 1 || n4 >= BENCH_ROUTES4 || n6 < 1 ||
	    n6 >= BENCH_ROUTES6 || lookups < BURST || trials < 1 ||
	    trials > MAX_TRIALS) {
		fprintf(stderr,
			"vz-lpm-bench: -n 1..%u, -6 1..%u, -l >= %u, "
			"-t 1..%u\n",
			BENCH_ROUTES4 - 1, BENCH_ROUTES6 - 1, BURST,
			MAX_TRIALS);
		return 2;
	}
	lookups -= lookups % BURST;
	huge = free_hugepages() >= HUGEPAGES_NEEDED;
	if (huge)
		eal_argc -= 4; /* not --no-huge --no-shconf -m 2048 */
	else
		eal_argv[5] = "--no-shconf"; /* not --in-memory */
	if (nargs < argc) { /* the user's EAL arguments replace ours */
		eal_argc = 1;
		for (i = (__u32)nargs + 1; i < (__u32)argc && eal_argc < 31;
		     i++)
			eal_argv[eal_argc++] = argv[i];
	}
	if (rte_eal_init(eal_argc, eal_argv) < 0) {
		fprintf(stderr, "vz-lpm-bench: rte_eal_init: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}

	rng_state = seed;
	addr4 = calloc(n4, sizeof(*addr4));
	plen4 = calloc(n4, 1);
	order4 = calloc(n4, sizeof(*order4));
	pf6 = calloc(n6, sizeof(*pf6));
	order6 = calloc(n6, sizeof(*order6));
	ips4 = calloc(KEYS, 4);
	be4 = calloc(KEYS, 4);
	rips4 = calloc(KEYS, 4);
	rbe4 = calloc(KEYS, 4);
	ips6 = calloc(KEYS, 16);
	rips6 = calloc(KEYS, 16);
	if (!addr4 || !plen4 || !order4 || !pf6 || !order6 || !ips4 || !be4 ||
	    !rips4 || !rbe4 || !ips6 || !rips6) {
		fprintf(stderr, "vz-lpm-bench: out of memory\n");
		return 1;
	}
	n4 = make4(addr4, plen4, n4);
	n6 = make6(pf6, n6);
	/* rte_lpm adds and deletes are slow (a few thousand a second): a
	 * hundredth of each table per trial keeps a run to minutes */
	ndel4 = n4 / 100 ? n4 / 100 : 1;
	ndel6 = n6 / 100 ? n6 / 100 : 1;
	rvals4 = route_table(n4);
	rvals6 = route_table(n6);
	if (!rvals4 || !rvals6) {
		fprintf(stderr, "vz-lpm-bench: out of memory\n");
		return 1;
	}

	/* keys: uniform, and inside random prefixes of the table */
	for (i = 0; i < KEYS; i++) {
		__u32 k = (__u32)rnd() % n4;

		ips4[i] = (__u32)rnd();
		be4[i] = htobe32(ips4[i]);
		rips4[i] = addr4[k] | ((__u32)rnd() & (~0u >> plen4[k]));
		if (plen4[k] == 32)
			rips4[i] = addr4[k];
		rbe4[i] = htobe32(rips4[i]);
		memset(ips6[i], 0, 16);
		ips6[i][0] = 0x20;
		rand_bits(ips6[i], 3);
		k = (__u32)rnd() % n6;
		memcpy(rips6[i], pf6[k].addr, 16);
		rand_bits(rips6[i], pf6[k].plen);
	}

	/* build each table, timed, RSS before and after */
	rss0 = rss_kib();
	err = vz_map_init(m4, 1);
	if (err) {
		fprintf(stderr, "vz-lpm-bench: vz_map_init: %s\n",
			strerror(-err));
		return 1;
	}
	t0 = now();
	for (i = 0; i < n4; i++)
		if (v4_add(m4, NULL, addr4[i], plen4[i], i, 0))
			return fprintf(stderr, "vz-lpm-bench: veloz add\n"), 1;
	load[0] = now() - t0;
	mem[0] = rss_kib() - rss0;

	hp0 = free_hugepages();
	rss0 = rss_kib();
	r4 = rte_lpm_create(
		"bench4", SOCKET_ID_ANY,
		&(struct rte_lpm_config){ .max_rules = BENCH_ROUTES4,
					  .number_tbl8s = 1 << 16 });
	if (!r4) {
		fprintf(stderr, "vz-lpm-bench: rte_lpm_create: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	t0 = now();
	for (i = 0; i < n4; i++)
		if (v4_add(NULL, r4, addr4[i], plen4[i], i, 1))
			return fprintf(stderr, "vz-lpm-bench: rte_lpm add\n"),
			       1;
	load[1] = now() - t0;
	mem[1] = rss_kib() - rss0;
	hmem[1] = (hp0 - free_hugepages()) * 2048;

	rss0 = rss_kib();
	err = vz_map_init(m6, 1);
	if (err) {
		fprintf(stderr, "vz-lpm-bench: vz_map_init: %s\n",
			strerror(-err));
		return 1;
	}
	t0 = now();
	for (i = 0; i < n6; i++)
		if (v6_add(m6, NULL, &pf6[i], i, 0))
			return fprintf(stderr, "vz-lpm-bench: veloz add6\n"), 1;
	load[2] = now() - t0;
	mem[2] = rss_kib() - rss0;

	hp0 = free_hugepages();
	rss0 = rss_kib();
	r6 = rte_lpm6_create(
		"bench6", SOCKET_ID_ANY,
		&(struct rte_lpm6_config){ .max_rules = BENCH_ROUTES6,
					   .number_tbl8s = 1 << 18 });
	if (!r6) {
		fprintf(stderr, "vz-lpm-bench: rte_lpm6_create: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	t0 = now();
	for (i = 0; i < n6; i++)
		if (v6_add(NULL, r6, &pf6[i], i, 1))
			return fprintf(stderr, "vz-lpm-bench: rte_lpm6 add\n"),
			       1;
	load[3] = now() - t0;
	mem[3] = rss_kib() - rss0;
	hmem[3] = (hp0 - free_hugepages()) * 2048;

	compare4(r4, ips4, be4, KEYS, "uniform");
	compare4(r4, rips4, rbe4, KEYS, "routed");
	compare6(r6, (const __u8(*)[16])ips6, KEYS, "uniform");
	compare6(r6, (const __u8(*)[16])rips6, KEYS, "routed");

	printf("vz-lpm-bench: %u IPv4 prefixes, %u IPv6 prefixes, %llu "
	       "lookups per measure, %u trials (interleaved), seed %llu\n",
	       n4, n6, (unsigned long long)lookups, trials,
	       (unsigned long long)seed);
	for (t = 0; t < trials; t++) {
#define TIME(slot, expr)                                  \
	do {                                              \
		t0 = now();                               \
		sink += (expr);                           \
		res[slot][t] = mlps(lookups, now() - t0); \
	} while (0)
		for (j = 0; j < 2; j++) {
			const __u32 *a4 = j ? rips4 : ips4,
				    *b4 = j ? rbe4 : be4;
			__u8(*a6)[16] = j ? rips6 : ips6;
			const struct vz_route *rv;
			int rd;

			for (rd = 0; rd < 2; rd++) {
				rv = rd ? rvals4 : NULL;
				TIME(LOOKUP(0, j, V_VZ + 3 * rd),
				     bench_lookups4(b4, lookups, KEYS - 1, rd));
				TIME(LOOKUP(0, j, V_RTE + 3 * rd),
				     rte4_single(r4, a4, lookups, rv));
				TIME(LOOKUP(0, j, V_RTEB + 3 * rd),
				     rte4_bulk(r4, a4, lookups, rv));
				rv = rd ? rvals6 : NULL;
				TIME(LOOKUP(1, j, V_VZ + 3 * rd),
				     bench_lookups6((const __u8(*)[16])a6,
						    lookups, KEYS - 1, rd));
				TIME(LOOKUP(1, j, V_RTE + 3 * rd),
				     rte6_single(r6, (const __u8(*)[16])a6,
						 lookups, rv));
				TIME(LOOKUP(1, j, V_RTEB + 3 * rd),
				     rte6_bulk(r6, a6, lookups, rv));
			}
		}
#undef TIME

		/* a random hundredth of each table out and back in, both */
		for (i = 0; i < n4; i++)
			order4[i] = i;
		for (i = 0; i < ndel4; i++) {
			j = i + (__u32)(rnd() % (n4 - i));
			__u32 x = order4[i];

			order4[i] = order4[j];
			order4[j] = x;
		}
		for (i = 0; i < n6; i++)
			order6[i] = i;
		for (i = 0; i < ndel6; i++) {
			j = i + (__u32)(rnd() % (n6 - i));
			__u32 x = order6[i];

			order6[i] = order6[j];
			order6[j] = x;
		}
		for (j = 0; j < 2; j++) {
			void *vm4 = j ? NULL : m4, *vm6 = j ? NULL : m6;

			t0 = now();
			for (i = 0; i < ndel4; i++)
				if (v4_del(vm4, r4, addr4[order4[i]],
					   plen4[order4[i]], (int)j))
					return fprintf(stderr, "del4\n"), 1;
			res[DEL4_VZ + j][t] =
				(double)ndel4 / (now() - t0) / 1e3;
			t0 = now();
			for (i = 0; i < ndel4; i++)
				if (v4_add(vm4, r4, addr4[order4[i]],
					   plen4[order4[i]], order4[i], (int)j))
					return fprintf(stderr, "add4\n"), 1;
			res[ADD4_VZ + j][t] =
				(double)ndel4 / (now() - t0) / 1e3;
			t0 = now();
			for (i = 0; i < ndel6; i++)
				if (v6_del(vm6, r6, &pf6[order6[i]], (int)j))
					return fprintf(stderr, "del6\n"), 1;
			res[DEL6_VZ + j][t] =
				(double)ndel6 / (now() - t0) / 1e3;
			t0 = now();
			for (i = 0; i < ndel6; i++)
				if (v6_add(vm6, r6, &pf6[order6[i]], order6[i],
					   (int)j))
					return fprintf(stderr, "add6\n"), 1;
			res[ADD6_VZ + j][t] =
				(double)ndel6 / (now() - t0) / 1e3;
		}
	}
	compare4(r4, ips4, be4, KEYS, "uniform, after the deletes");
	compare6(r6, (const __u8(*)[16])ips6, KEYS,
		 "uniform, after the deletes");

	printf("\nlookups, Mlookups/s, median of %u (veloz: vz_map_lookup() on a "
	       "VZ_LPM map, as an NF;\n\"lookup\": the pointer it returns, "
	       "rte's next hop; \"+ read route\": the route read, for rte\n"
	       "from a table its next hop indexes; IPv6 uniform: over "
	       "2000::/3)\n",
	       trials);
	printf("%-26s %8s %8s %8s %10s %10s\n", "", "veloz", "rte", "rte-bulk",
	       "veloz/rte", "veloz/bulk");
	for (i = 0; i < 8; i++) {
		static const char *const fam[] = { "ipv4", "ipv6" };
		static const char *const mix[] = { "uniform", "routed" };
		static const char *const what[] = { "lookup", "+ read route" };
		__u32 f = i / 4, x = i / 2 % 2, rd = i % 2;
		double v = bench_median(res[LOOKUP(f, x, V_VZ + 3 * rd)],
					(int)trials),
		       r = bench_median(res[LOOKUP(f, x, V_RTE + 3 * rd)],
					(int)trials),
		       b = bench_median(res[LOOKUP(f, x, V_RTEB + 3 * rd)],
					(int)trials);
		char name[64];

		snprintf(name, sizeof(name), "%s %s, %s", fam[f], mix[x],
			 what[rd]);
		printf("%-26s %8.1f %8.1f %8.1f %9.2fx %9.2fx\n", name, v, r, b,
		       v / r, v / b);
	}
	printf("\nupdates and deletes, k/s (first load once; then the median of "
	       "%u trials of %u IPv4 / %u IPv6 prefixes out and back in)\n",
	       trials, ndel4, ndel6);
	printf("%-22s %9s %9s %12s\n", "", "veloz", "rte", "veloz/rte");
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv4 first load",
	       n4 / load[0] / 1e3, n4 / load[1] / 1e3, load[1] / load[0]);
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv4 delete",
	       bench_median(res[DEL4_VZ], (int)trials),
	       bench_median(res[DEL4_RTE], (int)trials),
	       bench_median(res[DEL4_VZ], (int)trials) /
		       bench_median(res[DEL4_RTE], (int)trials));
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv4 add",
	       bench_median(res[ADD4_VZ], (int)trials),
	       bench_median(res[ADD4_RTE], (int)trials),
	       bench_median(res[ADD4_VZ], (int)trials) /
		       bench_median(res[ADD4_RTE], (int)trials));
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv6 first load",
	       n6 / load[2] / 1e3, n6 / load[3] / 1e3, load[3] / load[2]);
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv6 delete",
	       bench_median(res[DEL6_VZ], (int)trials),
	       bench_median(res[DEL6_RTE], (int)trials),
	       bench_median(res[DEL6_VZ], (int)trials) /
		       bench_median(res[DEL6_RTE], (int)trials));
	printf("%-22s %9.0f %9.0f %11.2fx\n", "ipv6 add",
	       bench_median(res[ADD6_VZ], (int)trials),
	       bench_median(res[ADD6_RTE], (int)trials),
	       bench_median(res[ADD6_VZ], (int)trials) /
		       bench_median(res[ADD6_RTE], (int)trials));
	printf("\nmemory, MiB grown while the table was built: RSS, plus the "
	       "huge pages DPDK took\n(veloz: trie and the map's rules, "
	       "%u IPv4 / %u IPv6 max_entries; rte: its tables as configured)\n",
	       BENCH_ROUTES4, BENCH_ROUTES6);
	printf("%-22s %9.1f %9.1f   (rte_lpm: %u rules, 2^16 tbl8s)\n", "ipv4",
	       mem[0] / 1024.0, (mem[1] + hmem[1]) / 1024.0, BENCH_ROUTES4);
	printf("%-22s %9.1f %9.1f   (rte_lpm6: %u rules, 2^18 tbl8s)\n", "ipv6",
	       mem[2] / 1024.0, (mem[3] + hmem[3]) / 1024.0, BENCH_ROUTES6);
	printf("pages: %ld MiB in transparent huge pages (veloz's tables, rte's "
	       "route tables); DPDK's tables %s\n",
	       status_kib("/proc/self/smaps_rollup", "AnonHugePages:") / 1024,
	       huge ? "on 2 MiB huge pages (hugetlbfs)"
		    : "on 4 KiB pages (--no-huge): NOT a like-for-like "
		      "comparison; reserve 2 MiB pages (sysctl vm.nr_hugepages)");
	printf("answers: %s\n",
	       wrong ? "MISMATCH (see above)" : "identical in both libraries");

	vz_map_free(m4);
	vz_map_free(m6);
	free(rvals4);
	free(rvals6);
	free(addr4);
	free(plen4);
	free(order4);
	free(pf6);
	free(order6);
	free(ips4);
	free(be4);
	free(rips4);
	free(rbe4);
	free(ips6);
	free(rips6);
	rte_lpm_free(r4);
	rte_lpm6_free(r6);
	rte_eal_cleanup();
	return wrong;
}
