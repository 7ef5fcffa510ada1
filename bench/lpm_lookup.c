// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-lpm-bench: the native LPM map holding an internet-sized IPv4 table.
 * Loads N distinct random prefixes with a BGP-like length distribution (and
 * a default route), then times random lookups on one thread, through
 * vz_map_lookup_elem() as an NF calls it, reading the value found as the
 * router does. Two address mixes: uniform over the address space, and
 * inside the loaded prefixes. Prints Mlookups/s, the load time and RSS.
 * A benchmark, not a test: it asserts nothing.
 *
 *   vz-lpm-bench [-n PREFIXES] [-l LOOKUPS] [-s SEED]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <veloz/maps.h>

struct key4 {
	__u32 prefixlen;
	__u8 addr[4];
};

struct route {
	__u32 nexthop;
	__u32 kind;
};

/* Prefix lengths per mille, roughly a 2024 full table; a few longer than
 * /24 (not in the DFZ, common inside networks) so groups are used too. */
static const struct {
	__u32 plen;
	__u32 permille;
} lengths[] = {
	{ 8, 1 },   { 10, 1 },	 { 12, 1 },  { 14, 1 },	  { 15, 1 },
	{ 16, 14 }, { 17, 8 },	 { 18, 13 }, { 19, 25 },  { 20, 40 },
	{ 21, 45 }, { 22, 120 }, { 23, 85 }, { 24, 640 }, { 25, 1 },
	{ 26, 1 },  { 28, 1 },	 { 30, 1 },  { 32, 1 },
};

#define KEYS_CYCLED (1u << 20) /* lookup keys made up front, then reused */

static __u64 rng_state;

static __u64 rnd(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static __u32 rand_plen(void)
{
	__u32 r = (__u32)(rnd() % 1000), i;

	for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		if (r < lengths[i].permille)
			return lengths[i].plen;
		r -= lengths[i].permille;
	}
	return 24;
}

static void put_addr(__u8 *addr, __u32 a)
{
	addr[0] = (__u8)(a >> 24);
	addr[1] = (__u8)(a >> 16);
	addr[2] = (__u8)(a >> 8);
	addr[3] = (__u8)a;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

/* n lookups of keys[0..KEYS_CYCLED) in turn; Mlookups/s */
static double run(struct vz_map *map, const struct key4 *keys, __u64 n,
		  __u64 *found, __u64 *sum)
{
	const struct route *r;
	double t0, t1;
	__u64 i;

	*found = *sum = 0;
	t0 = now();
	for (i = 0; i < n; i++) {
		r = vz_map_lookup_elem(map, &keys[i & (KEYS_CYCLED - 1)]);
		if (r) {
			*found += r->nexthop != 0; /* not just the /0 */
			*sum += r->nexthop;
		}
	}
	t1 = now();
	return (double)n / (t1 - t0) / 1e6;
}

int main(int argc, char **argv)
{
	__u64 lookups = 10000000, seed = 1, found, sum;
	__u32 nprefixes = 750000, i, a, plen, loaded = 0, tries = 0;
	struct key4 key, *prefixes, *keys;
	struct route route = { 0 };
	struct vz_map map;
	long rss0, rss1;
	double t0, load_s, mlps;
	int opt, err;

	while ((opt = getopt(argc, argv, "n:l:s:h")) != -1) {
		switch (opt) {
		case 'n':
			nprefixes = (__u32)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			lookups = strtoull(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n PREFIXES] [-l LOOKUPS] [-s SEED]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!nprefixes || nprefixes > (1u << 24) || !lookups) {
		fprintf(stderr, "vz-lpm-bench: -n 1..16777216, -l > 0\n");
		return 2;
	}
	rng_state = seed;
	prefixes = calloc(nprefixes, sizeof(*prefixes));
	keys = calloc(KEYS_CYCLED, sizeof(*keys));
	if (!prefixes || !keys) {
		fprintf(stderr, "vz-lpm-bench: out of memory\n");
		return 1;
	}
	map = (struct vz_map){ .name = "routes4",
			       .type = BPF_MAP_TYPE_LPM_TRIE,
			       .key_size = sizeof(struct key4),
			       .value_size = sizeof(struct route),
			       .max_entries = nprefixes + 1 > (1u << 20)
						      ? nprefixes + 1
						      : 1u << 20,
			       .flags = BPF_F_NO_PREALLOC };
	rss0 = rss_kib();
	err = vz_map_init(&map, 1);
	if (err) {
		fprintf(stderr, "vz-lpm-bench: vz_map_init: %s\n",
			strerror(-err));
		return 1;
	}

	/* the default route, then distinct random prefixes */
	t0 = now();
	key = (struct key4){ .prefixlen = 0 };
	vz_map_update_elem(&map, &key, &route, BPF_NOEXIST);
	while (loaded < nprefixes && tries++ < 4 * nprefixes) {
		plen = rand_plen();
		a = (__u32)rnd() & (plen ? ~0u << (32 - plen) : 0);
		key.prefixlen = plen;
		put_addr(key.addr, a);
		route.nexthop = loaded + 1;
		err = vz_map_update_elem(&map, &key, &route, BPF_NOEXIST);
		if (err == -EEXIST)
			continue;
		if (err) {
			fprintf(stderr, "vz-lpm-bench: update: %s\n",
				strerror(-err));
			return 1;
		}
		prefixes[loaded++] = key;
	}
	load_s = now() - t0;
	rss1 = rss_kib();
	printf("loaded %u prefixes + default route in %.3f s "
	       "(%.0f k updates/s); RSS %.1f MiB (map %.1f MiB)\n",
	       loaded, load_s, loaded / load_s / 1e3, rss1 / 1024.0,
	       (rss1 - rss0) / 1024.0);

	for (i = 0; i < KEYS_CYCLED; i++) {
		keys[i].prefixlen = 32;
		put_addr(keys[i].addr, (__u32)rnd());
	}
	mlps = run(&map, keys, lookups, &found, &sum);
	printf("uniform addresses:  %6.1f Mlookups/s  (%llu lookups, "
	       "%.1f%% under a prefix other than /0, checksum %llu)\n",
	       mlps, (unsigned long long)lookups,
	       100.0 * (double)found / (double)lookups,
	       (unsigned long long)sum);

	for (i = 0; i < KEYS_CYCLED; i++) {
		key = prefixes[rnd() % loaded];
		a = (__u32)key.addr[0] << 24 | (__u32)key.addr[1] << 16 |
		    (__u32)key.addr[2] << 8 | key.addr[3];
		if (key.prefixlen < 32)
			a |= (__u32)rnd() & (~0u >> key.prefixlen);
		keys[i].prefixlen = 32;
		put_addr(keys[i].addr, a);
	}
	mlps = run(&map, keys, lookups, &found, &sum);
	printf("routed addresses:   %6.1f Mlookups/s  (%llu lookups, "
	       "checksum %llu)\n",
	       mlps, (unsigned long long)lookups, (unsigned long long)sum);
	printf("RSS at exit %.1f MiB\n", rss_kib() / 1024.0);
	vz_map_free(&map);
	free(prefixes);
	free(keys);
	return 0;
}
