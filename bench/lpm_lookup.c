// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench: veloz's native LPM maps beside DPDK's rte_lpm and rte_lpm6,
 * in one process, on the same tables and the same keys.
 *
 * Tables: N IPv4 prefixes with a BGP-like mix of lengths (mostly /24s,
 * some longer than /24 so second-level groups are used too), and M IPv6
 * prefixes shaped like a global table (allocations of /29../32 inside the
 * RIRs' blocks, more-specifics down to /48 under them), by lpm_tables.c.
 * Neither has a default route (rte_lpm takes depths 1..32 only). A rule's
 * next hop is its index, in both libraries: every answer is compared.
 *
 * veloz is looked up as an NF looks it up (lpm_nf.c, through nf.h's typed
 * fast path): IPv4 by vz_lpm_lookup4() on the address, as the router does,
 * and (the vz-key column) by vz_map_lookup() on BPF's key struct built on
 * the stack; IPv6 by vz_map_lookup(); the value read. rte_lpm by
 * rte_lpm_lookup() and rte_lpm_lookup_bulk() (bursts of 32); rte_lpm6 by
 * rte_lpm6_lookup() and rte_lpm6_lookup_bulk_func().
 *
 * Keys: "uniform" addresses drawn uniformly (IPv4: the whole space; IPv6:
 * 2000::/3, the space the table lives in: over all of ::/0, 7 keys in 8
 * would be answered "no route" by either library's first level), and
 * "routed" addresses inside random prefixes of the table.
 *
 * Every measure is repeated -t times (default 7), the libraries
 * interleaved inside each trial; the medians and the ratios of medians are
 * printed (veloz / DPDK: above 1.0 veloz is faster). Updates: each trial
 * deletes a random hundredth of each table and adds it back, timed; the
 * first load is timed once, and an IPv6 reload (v6_reload()) once at the
 * end. Memory: RSS grown while each table is built (DPDK's is mmap()ed up
 * front by EAL but counted as touched), and what is in huge pages.
 *
 * Pages: veloz's first level asks for transparent huge pages; DPDK's
 * tables are on huge pages when enough 2 MiB pages are reserved
 * (vm.nr_hugepages: EAL runs --in-memory on them), else on 4 KiB pages
 * (--no-huge, whose memory is a shmem memfd THP does not back), which
 * makes rte_lpm's random lookups miss the TLB: the output says which, and
 * only the first is a comparison of the tables rather than of page sizes.
 *
 * A benchmark, not a test: it asserts nothing but that both libraries give
 * the same answers (a mismatch is reported, and the exit status is 1).
 *   vz-lpm-bench [-n V4PREFIXES] [-6 V6PREFIXES] [-l LOOKUPS] [-t TRIALS]
 *                [-s SEED] [-- EAL-ARGS]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_memory.h>

#include <veloz/abi.h>
#include <veloz/maps.h>

#include "common/clock.h"
#include "bench_stats.h"
#include "lpm_nf.h"
#include "lpm_tables.h"

#define KEYS (1u << 20) /* lookup keys made up front, then cycled */
#define BURST BENCH_BURST
#define MAX_TRIALS BENCH_MAX_TRIALS
/* What rte_lpm and rte_lpm6, as configured here, take: with fewer 2 MiB
 * pages free DPDK runs --no-huge, on 4 KiB pages (said in the output). */
#define HUGEPAGES_NEEDED 448

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

/*
 * Timed loops: n lookups over keys[i & (KEYS - 1)], next hops summed. With
 * vals, each next hop indexes a route table shaped as veloz's values (one
 * struct vz_route per rule, on huge pages too) and the route is read: what
 * a DPDK router keeping per-route data does, and what an NF's lookup of a
 * map value is.
 *
 * IPv4 keys are the packet's big-endian addresses for both libraries:
 * rte_lpm takes host order, so each is converted first, as DPDK's l3fwd
 * does (rte_be_to_cpu_32() of the header's dst_addr) and as veloz's lookup
 * does inside. (Before, rte was given keys already in host order, a
 * conversion veloz's figure paid for and rte's did not.)
 */
static __u64 rte4_single(const struct rte_lpm *r, const __u32 *be, __u64 n,
			 const struct vz_route *vals)
{
	__u64 i, sum = 0;
	__u32 nh;

	for (i = 0; i < n; i++)
		if (!rte_lpm_lookup(r, be32toh(be[i & (KEYS - 1)]), &nh))
			sum += vals ? vals[nh].nexthop : nh;
	return sum;
}

static __u64 rte4_bulk(const struct rte_lpm *r, const __u32 *be, __u64 n,
		       const struct vz_route *vals)
{
	__u32 ips[BURST], hops[BURST];
	__u64 i, sum = 0;
	int j;

	for (i = 0; i + BURST <= n; i += BURST) {
		for (j = 0; j < BURST; j++)
			ips[j] = be32toh(be[(i + (__u64)j) & (KEYS - 1)]);
		rte_lpm_lookup_bulk(r, ips, hops, BURST);
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
/* V_VZK: IPv4 through the key struct (IPv6 has only that way: V_VZ) */
enum { V_VZ, V_RTE, V_VZB, V_RTEB, V_VZK, NLOOKUPS }; /* then each + read */
#define NVARIANTS (2 * NLOOKUPS)
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

/* Both libraries' answers for the first `n` keys (a multiple of BURST)
 * must agree, veloz's single and bulk lookups too. */
static __u32 bulk_hops[KEYS];

static void compare4(struct rte_lpm *r, const __u32 *ips, const __u32 *be,
		     __u32 n, const char *when)
{
	__u32 i, a, b, bad = 0;

	bench_route4_bulk(be, n, bulk_hops);
	for (i = 0; i < n; i++) {
		a = bench_route4(be[i]);
		if (rte_lpm_lookup(r, ips[i], &b))
			b = BENCH_NONE;
		bad += a != b || bulk_hops[i] != b ||
		       bench_route4_key(be[i]) != b;
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

	bench_route6_bulk(ips, n, bulk_hops);
	for (i = 0; i < n; i++) {
		a = bench_route6(ips[i]);
		if (rte_lpm6_lookup(r, ips[i], &b))
			b = BENCH_NONE;
		bad += a != b || bulk_hops[i] != b;
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

/* The run's settings: -n, -6, -l, -t, -s; nargs: argv before "--". */
struct args {
	__u64 lookups, seed;
	__u32 n4, n6, trials;
	int nargs;
};

/* Everything one run builds: prefixes, keys, both libraries' tables. */
struct tables {
	__u32 n4, n6, ndel4, ndel6;
	__u32 *addr4, *order4, *order6;
	__u8 *plen4;
	struct prefix6 *pf6;
	/* keys: uniform, and inside random prefixes (host order, and big
	 * endian as veloz's maps take them) */
	__u32 *ips4, *be4, *rips4, *rbe4;
	__u8 (*ips6)[16], (*rips6)[16];
	struct vz_route *rvals4, *rvals6;
	struct vz_map *m4, *m6;
	struct rte_lpm *r4;
	struct rte_lpm6 *r6;
	/* load time (s), RSS and huge pages grown (KiB): veloz4, rte4,
	 * veloz6, rte6; then IPv6 reloaded (v6_reload()): veloz, rte */
	double load[4], reload6[2];
	long mem[4], hmem[4];
};

/* 0, or the exit status: 0 after -h, 2 on bad arguments. */
static int parse_args(struct args *o, int argc, char **argv)
{
	int opt;
	__u32 i;

	*o = (struct args){ .lookups = 10000000,
			    .seed = 1,
			    .n4 = 750000,
			    .n6 = 190000,
			    .trials = 7,
			    .nargs = argc };
	for (i = 1; i < (__u32)argc; i++)
		if (!strcmp(argv[i], "--")) {
			o->nargs = (int)i;
			break;
		}
	while ((opt = getopt(o->nargs, argv, "n:6:l:t:s:h")) != -1) {
		switch (opt) {
		case 'n':
			o->n4 = (__u32)strtoul(optarg, NULL, 0);
			break;
		case '6':
			o->n6 = (__u32)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			o->lookups = strtoull(optarg, NULL, 0);
			break;
		case 't':
			o->trials = (__u32)strtoul(optarg, NULL, 0);
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			usage(argv[0]);
			return -1;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (optind != o->nargs || o->n4 < 1 || o->n4 >= BENCH_ROUTES4 ||
	    o->n6 < 1 || o->n6 >= BENCH_ROUTES6 || o->lookups < BURST ||
	    o->trials < 1 || o->trials > MAX_TRIALS) {
		fprintf(stderr,
			"vz-lpm-bench: -n 1..%u, -6 1..%u, -l >= %u, "
			"-t 1..%u\n",
			BENCH_ROUTES4 - 1, BENCH_ROUTES6 - 1, BURST,
			MAX_TRIALS);
		return 2;
	}
	o->lookups -= o->lookups % BURST;
	return 0;
}

/*
 * EAL on huge pages (--in-memory) when enough are free; else --no-huge,
 * which EAL will not combine with --in-memory (its legacy memory mode): no
 * shared config files then either (--no-shconf). The user's EAL arguments
 * replace ours. 0, or -1 said.
 */
static int start_eal(int argc, char **argv, int nargs, int *huge)
{
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
	int eal_argc = 10, i;

	*huge = free_hugepages() >= HUGEPAGES_NEEDED;
	if (*huge)
		eal_argc -= 4; /* not --no-huge --no-shconf -m 2048 */
	else
		eal_argv[5] = "--no-shconf"; /* not --in-memory */
	if (nargs < argc) {
		eal_argc = 1;
		for (i = nargs + 1; i < argc && eal_argc < 31; i++)
			eal_argv[eal_argc++] = argv[i];
	}
	if (rte_eal_init(eal_argc, eal_argv) < 0) {
		fprintf(stderr, "vz-lpm-bench: rte_eal_init: %s\n",
			rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

/* The prefixes, the keys' room and the route tables: 0, or -1 said. */
static int alloc_tables(struct tables *t, const struct args *o)
{
	t->addr4 = calloc(o->n4, sizeof(*t->addr4));
	t->plen4 = calloc(o->n4, 1);
	t->order4 = calloc(o->n4, sizeof(*t->order4));
	t->pf6 = calloc(o->n6, sizeof(*t->pf6));
	t->order6 = calloc(o->n6, sizeof(*t->order6));
	t->ips4 = calloc(KEYS, 4);
	t->be4 = calloc(KEYS, 4);
	t->rips4 = calloc(KEYS, 4);
	t->rbe4 = calloc(KEYS, 4);
	t->ips6 = calloc(KEYS, 16);
	t->rips6 = calloc(KEYS, 16);
	if (!t->addr4 || !t->plen4 || !t->order4 || !t->pf6 || !t->order6 ||
	    !t->ips4 || !t->be4 || !t->rips4 || !t->rbe4 || !t->ips6 ||
	    !t->rips6)
		goto oom;
	t->n4 = make4(t->addr4, t->plen4, o->n4);
	t->n6 = make6(t->pf6, o->n6);
	/* rte_lpm adds and deletes are slow (a few thousand a second): a
	 * hundredth of each table per trial keeps a run to minutes */
	t->ndel4 = t->n4 / 100 ? t->n4 / 100 : 1;
	t->ndel6 = t->n6 / 100 ? t->n6 / 100 : 1;
	t->rvals4 = route_table(t->n4);
	t->rvals6 = route_table(t->n6);
	if (t->rvals4 && t->rvals6)
		return 0;
oom:
	fprintf(stderr, "vz-lpm-bench: out of memory\n");
	return -1;
}

/* keys: uniform, and inside random prefixes of the table */
static void make_keys(struct tables *t)
{
	__u32 i, k;

	for (i = 0; i < KEYS; i++) {
		k = (__u32)rnd() % t->n4;
		t->ips4[i] = (__u32)rnd();
		t->be4[i] = htobe32(t->ips4[i]);
		t->rips4[i] =
			t->addr4[k] | ((__u32)rnd() & (~0u >> t->plen4[k]));
		if (t->plen4[k] == 32)
			t->rips4[i] = t->addr4[k];
		t->rbe4[i] = htobe32(t->rips4[i]);
		memset(t->ips6[i], 0, 16);
		t->ips6[i][0] = 0x20;
		rand_bits(t->ips6[i], 3);
		k = (__u32)rnd() % t->n6;
		memcpy(t->rips6[i], t->pf6[k].addr, 16);
		rand_bits(t->rips6[i], t->pf6[k].plen);
	}
}

/* Each table built, timed, RSS (and DPDK's huge pages) before and after. */
static int build4(struct tables *t)
{
	long rss0 = rss_kib(), hp0;
	int err = vz_map_init(t->m4, 1);
	double t0;
	__u32 i;

	if (err)
		return fprintf(stderr, "vz-lpm-bench: vz_map_init: %s\n",
			       strerror(-err)),
		       -1;
	t0 = vz_now_s();
	for (i = 0; i < t->n4; i++)
		if (v4_add(t->m4, NULL, t->addr4[i], t->plen4[i], i, 0))
			return fprintf(stderr, "vz-lpm-bench: veloz add\n"), -1;
	t->load[0] = vz_now_s() - t0;
	t->mem[0] = rss_kib() - rss0;

	hp0 = free_hugepages();
	rss0 = rss_kib();
	t->r4 = rte_lpm_create(
		"bench4", SOCKET_ID_ANY,
		&(struct rte_lpm_config){ .max_rules = BENCH_ROUTES4,
					  .number_tbl8s = 1 << 16 });
	if (!t->r4)
		return fprintf(stderr, "vz-lpm-bench: rte_lpm_create: %s\n",
			       rte_strerror(rte_errno)),
		       -1;
	t0 = vz_now_s();
	for (i = 0; i < t->n4; i++)
		if (v4_add(NULL, t->r4, t->addr4[i], t->plen4[i], i, 1))
			return fprintf(stderr, "vz-lpm-bench: rte_lpm add\n"),
			       -1;
	t->load[1] = vz_now_s() - t0;
	t->mem[1] = rss_kib() - rss0;
	t->hmem[1] = (hp0 - free_hugepages()) * 2048;
	return 0;
}

static int build6(struct tables *t)
{
	long rss0 = rss_kib(), hp0;
	int err = vz_map_init(t->m6, 1);
	double t0;
	__u32 i;

	if (err)
		return fprintf(stderr, "vz-lpm-bench: vz_map_init: %s\n",
			       strerror(-err)),
		       -1;
	t0 = vz_now_s();
	for (i = 0; i < t->n6; i++)
		if (v6_add(t->m6, NULL, &t->pf6[i], i, 0))
			return fprintf(stderr, "vz-lpm-bench: veloz add6\n"),
			       -1;
	t->load[2] = vz_now_s() - t0;
	t->mem[2] = rss_kib() - rss0;

	hp0 = free_hugepages();
	rss0 = rss_kib();
	t->r6 = rte_lpm6_create(
		"bench6", SOCKET_ID_ANY,
		&(struct rte_lpm6_config){ .max_rules = BENCH_ROUTES6,
					   .number_tbl8s = 1 << 18 });
	if (!t->r6)
		return fprintf(stderr, "vz-lpm-bench: rte_lpm6_create: %s\n",
			       rte_strerror(rte_errno)),
		       -1;
	t0 = vz_now_s();
	for (i = 0; i < t->n6; i++)
		if (v6_add(NULL, t->r6, &t->pf6[i], i, 1))
			return fprintf(stderr, "vz-lpm-bench: rte_lpm6 add\n"),
			       -1;
	t->load[3] = vz_now_s() - t0;
	t->mem[3] = rss_kib() - rss0;
	t->hmem[3] = (hp0 - free_hugepages()) * 2048;
	return 0;
}

/* Trial tr's lookups: each family, key mix and variant, interleaved. */
static void time_lookups(const struct tables *t, __u64 lookups, __u32 tr)
{
	double t0;
	__u32 j;
	int rd;

#define TIME(slot, expr)                                        \
	do {                                                    \
		t0 = vz_now_s();                                \
		sink += (expr);                                 \
		res[slot][tr] = mlps(lookups, vz_now_s() - t0); \
	} while (0)
	for (j = 0; j < 2; j++) {
		const __u32 *b4 = j ? t->rbe4 : t->be4;
		__u8(*a6)[16] = j ? t->rips6 : t->ips6;
		const struct vz_route *rv;

		for (rd = 0; rd < 2; rd++) {
			rv = rd ? t->rvals4 : NULL;
			TIME(LOOKUP(0, j, V_VZ + NLOOKUPS * rd),
			     bench_lookups4(b4, lookups, KEYS - 1, rd));
			TIME(LOOKUP(0, j, V_RTE + NLOOKUPS * rd),
			     rte4_single(t->r4, b4, lookups, rv));
			TIME(LOOKUP(0, j, V_VZB + NLOOKUPS * rd),
			     bench_bulk4(b4, lookups, KEYS - 1, rd));
			TIME(LOOKUP(0, j, V_RTEB + NLOOKUPS * rd),
			     rte4_bulk(t->r4, b4, lookups, rv));
			TIME(LOOKUP(0, j, V_VZK + NLOOKUPS * rd),
			     bench_lookups4_key(b4, lookups, KEYS - 1, rd));
			rv = rd ? t->rvals6 : NULL;
			TIME(LOOKUP(1, j, V_VZ + NLOOKUPS * rd),
			     bench_lookups6((const __u8(*)[16])a6, lookups,
					    KEYS - 1, rd));
			TIME(LOOKUP(1, j, V_RTE + NLOOKUPS * rd),
			     rte6_single(t->r6, (const __u8(*)[16])a6, lookups,
					 rv));
			TIME(LOOKUP(1, j, V_VZB + NLOOKUPS * rd),
			     bench_bulk6((const __u8(*)[16])a6, lookups,
					 KEYS - 1, rd));
			TIME(LOOKUP(1, j, V_RTEB + NLOOKUPS * rd),
			     rte6_bulk(t->r6, a6, lookups, rv));
		}
	}
#undef TIME
}

/* order[0..k): a random k of 0..n-1 (a partial Fisher-Yates shuffle). */
static void pick_some(__u32 *order, __u32 n, __u32 k)
{
	__u32 i, j, x;

	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = 0; i < k; i++) {
		j = i + (__u32)(rnd() % (n - i));
		x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
}

/* Trial tr: a random hundredth of each table out and back in, both. */
static int time_updates(struct tables *t, __u32 tr)
{
	const __u32 *o4 = t->order4, *o6 = t->order6;
	double t0;
	__u32 i, j;

	pick_some(t->order4, t->n4, t->ndel4);
	pick_some(t->order6, t->n6, t->ndel6);
	for (j = 0; j < 2; j++) {
		void *vm4 = j ? NULL : t->m4, *vm6 = j ? NULL : t->m6;

		t0 = vz_now_s();
		for (i = 0; i < t->ndel4; i++)
			if (v4_del(vm4, t->r4, t->addr4[o4[i]], t->plen4[o4[i]],
				   (int)j))
				return fprintf(stderr, "del4\n"), -1;
		res[DEL4_VZ + j][tr] =
			(double)t->ndel4 / (vz_now_s() - t0) / 1e3;
		t0 = vz_now_s();
		for (i = 0; i < t->ndel4; i++)
			if (v4_add(vm4, t->r4, t->addr4[o4[i]], t->plen4[o4[i]],
				   o4[i], (int)j))
				return fprintf(stderr, "add4\n"), -1;
		res[ADD4_VZ + j][tr] =
			(double)t->ndel4 / (vz_now_s() - t0) / 1e3;
		t0 = vz_now_s();
		for (i = 0; i < t->ndel6; i++)
			if (v6_del(vm6, t->r6, &t->pf6[o6[i]], (int)j))
				return fprintf(stderr, "del6\n"), -1;
		res[DEL6_VZ + j][tr] =
			(double)t->ndel6 / (vz_now_s() - t0) / 1e3;
		t0 = vz_now_s();
		for (i = 0; i < t->ndel6; i++)
			if (v6_add(vm6, t->r6, &t->pf6[o6[i]], o6[i], (int)j))
				return fprintf(stderr, "add6\n"), -1;
		res[ADD6_VZ + j][tr] =
			(double)t->ndel6 / (vz_now_s() - t0) / 1e3;
	}
	return 0;
}

static void print_lookups(__u32 trials)
{
	static const char *const fam[] = { "ipv4", "ipv6" };
	static const char *const mix[] = { "uniform", "routed" };
	static const char *const what[] = { "lookup", "+ read route" };
	__u32 i, f, x, rd, v;
	double m[NLOOKUPS];
	char name[64];

	printf("\nlookups, Mlookups/s, median of %u (veloz: as an NF looks up "
	       "a VZ_LPM map: IPv4\nvz_lpm_lookup4() on the address, IPv6 "
	       "vz_map_lookup(); vz-key: IPv4 through\nvz_map_lookup() on "
	       "BPF's key struct {32, addr};\nbulk: vz_map_lookup_lpm_bulk() and "
	       "rte_lpm*_lookup_bulk*(), %u keys a call;\n\"lookup\": the "
	       "pointer veloz returns, rte's next hop; \"+ read route\": the "
	       "route read,\nfor rte from a table its next hop indexes; IPv6 "
	       "uniform: over 2000::/3)\n",
	       trials, BURST);
	printf("%-26s %7s %7s %9s %7s %7s %9s %7s %9s\n", "", "veloz", "rte",
	       "veloz/rte", "vz-bulk", "rte-bulk", "bulk/bulk", "vz-key",
	       "key/rte");
	for (i = 0; i < 8; i++) {
		f = i / 4;
		x = i / 2 % 2;
		rd = i % 2;
		for (v = 0; v < NLOOKUPS; v++)
			m[v] = bench_median(
				res[LOOKUP(f, x, v + NLOOKUPS * rd)],
				(int)trials);
		snprintf(name, sizeof(name), "%s %s, %s", fam[f], mix[x],
			 what[rd]);
		printf("%-26s %7.1f %7.1f %8.2fx %7.1f %7.1f %8.2fx", name,
		       m[V_VZ], m[V_RTE], m[V_VZ] / m[V_RTE], m[V_VZB],
		       m[V_RTEB], m[V_VZB] / m[V_RTEB]);
		if (f == 0)
			printf(" %7.1f %8.2fx\n", m[V_VZK],
			       m[V_VZK] / m[V_RTE]);
		else
			printf(" %7s %9s\n", "-", "-");
	}
}

/* One row of updates: veloz's and rte's medians (k/s), and their ratio. */
static void print_update(const char *name, int vz, __u32 trials)
{
	double v = bench_median(res[vz], (int)trials),
	       r = bench_median(res[vz + 1], (int)trials);

	printf("%-22s %9.0f %9.0f %11.2fx\n", name, v, r, v / r);
}

/* A whole table of n prefixes loaded in vz and rte seconds. */
static void print_load(const char *name, __u32 n, double vz, double rte)
{
	printf("%-22s %9.0f %9.0f %11.2fx\n", name, n / vz / 1e3, n / rte / 1e3,
	       rte / vz);
}

static void print_updates(const struct tables *t, __u32 trials)
{
	printf("\nupdates and deletes, k/s (first load once; then the median of "
	       "%u trials of %u IPv4 / %u IPv6 prefixes out and back in)\n",
	       trials, t->ndel4, t->ndel6);
	printf("%-22s %9s %9s %12s\n", "", "veloz", "rte", "veloz/rte");
	print_load("ipv4 first load", t->n4, t->load[0], t->load[1]);
	print_update("ipv4 delete", DEL4_VZ, trials);
	print_update("ipv4 add", ADD4_VZ, trials);
	print_load("ipv6 first load", t->n6, t->load[2], t->load[3]);
	print_update("ipv6 delete", DEL6_VZ, trials);
	print_update("ipv6 add", ADD6_VZ, trials);
	print_load("ipv6 reload", t->n6, t->reload6[0], t->reload6[1]);
	printf("(reload: every IPv6 prefix out, then all back in, timed once; "
	       "veloz's first load\ncounts the first touch of its pages, "
	       "rte's were touched by EAL's init)\n");
}

static void print_memory(const struct tables *t, int huge)
{
	printf("\nmemory, MiB grown while the table was built: RSS, plus the "
	       "huge pages DPDK took\n(veloz: trie and the map's rules, "
	       "%u IPv4 / %u IPv6 max_entries; rte: its tables as configured)\n",
	       BENCH_ROUTES4, BENCH_ROUTES6);
	printf("%-22s %9.1f %9.1f   (rte_lpm: %u rules, 2^16 tbl8s)\n", "ipv4",
	       t->mem[0] / 1024.0, (t->mem[1] + t->hmem[1]) / 1024.0,
	       BENCH_ROUTES4);
	printf("%-22s %9.1f %9.1f   (rte_lpm6: %u rules, 2^18 tbl8s)\n", "ipv6",
	       t->mem[2] / 1024.0, (t->mem[3] + t->hmem[3]) / 1024.0,
	       BENCH_ROUTES6);
	printf("pages: %ld MiB in transparent huge pages (veloz's tables, rte's "
	       "route tables); DPDK's tables %s\n",
	       status_kib("/proc/self/smaps_rollup", "AnonHugePages:") / 1024,
	       huge ? "on 2 MiB huge pages (hugetlbfs)"
		    : "on 4 KiB pages (--no-huge): NOT a like-for-like "
		      "comparison; reserve 2 MiB pages (sysctl vm.nr_hugepages)");
}

static void free_tables(struct tables *t)
{
	vz_map_free(t->m4);
	vz_map_free(t->m6);
	free(t->rvals4);
	free(t->rvals6);
	free(t->addr4);
	free(t->plen4);
	free(t->order4);
	free(t->pf6);
	free(t->order6);
	free(t->ips4);
	free(t->be4);
	free(t->rips4);
	free(t->rbe4);
	free(t->ips6);
	free(t->rips6);
	rte_lpm_free(t->r4);
	rte_lpm6_free(t->r6);
}

int main(int argc, char **argv)
{
	struct tables t = { .m4 = bench_map4(), .m6 = bench_map6() };
	struct args o;
	int ret, huge;
	__u32 tr;

	ret = parse_args(&o, argc, argv);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (start_eal(argc, argv, o.nargs, &huge))
		return 1;
	rng_state = o.seed;
	if (alloc_tables(&t, &o))
		return 1;
	make_keys(&t);
	if (build4(&t) || build6(&t))
		return 1;
	compare4(t.r4, t.ips4, t.be4, KEYS, "uniform");
	compare4(t.r4, t.rips4, t.rbe4, KEYS, "routed");
	compare6(t.r6, (const __u8(*)[16])t.ips6, KEYS, "uniform");
	compare6(t.r6, (const __u8(*)[16])t.rips6, KEYS, "routed");

	printf("vz-lpm-bench: %u IPv4 prefixes, %u IPv6 prefixes, %llu "
	       "lookups per measure, %u trials (interleaved), seed %llu\n",
	       t.n4, t.n6, (unsigned long long)o.lookups, o.trials,
	       (unsigned long long)o.seed);
	for (tr = 0; tr < o.trials; tr++) {
		time_lookups(&t, o.lookups, tr);
		if (time_updates(&t, tr))
			return 1;
	}
	for (tr = 0; tr < 2; tr++)
		if ((t.reload6[tr] = v6_reload(tr ? NULL : t.m6, t.r6, t.pf6,
					       t.n6, (int)tr)) < 0)
			return fprintf(stderr, "reload6\n"), 1;
	compare4(t.r4, t.ips4, t.be4, KEYS, "uniform, after the deletes");
	compare6(t.r6, (const __u8(*)[16])t.ips6, KEYS,
		 "uniform, after the deletes and the reload");
	compare6(t.r6, (const __u8(*)[16])t.rips6, KEYS, "routed, reloaded");

	print_lookups(o.trials);
	print_updates(&t, o.trials);
	print_memory(&t, huge);
	printf("answers: %s\n",
	       wrong ? "MISMATCH (see above)" : "identical in both libraries");
	free_tables(&t);
	rte_eal_cleanup();
	return wrong;
}
