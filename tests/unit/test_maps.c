// SPDX-License-Identifier: BSD-2-Clause
/*
 * Native maps against the kernel's. Every operation runs on a native map and,
 * when we may create BPF maps (root), on a kernel map of the same type and
 * shape; return codes and values must match, and must be what BPF documents.
 * LRU eviction order is the one place BPF is approximate: the native choice
 * (exactly the least recently used) is checked on its own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <veloz/maps.h>

#include "check.h"

static int kernel_compared; /* operations checked against a kernel map */

/* A native map and, if available, its kernel twin. */
struct pair {
	struct vz_map native;
	int kfd; /* -1: no kernel map (not root) */
	const char *what;
};

static void pair_init(struct pair *p, const char *what, __u32 type,
		      __u32 key_size, __u32 value_size, __u32 max_entries,
		      __u32 flags, __u32 nworkers)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
	int err;

	memset(p, 0, sizeof(*p));
	p->what = what;
	p->native = (struct vz_map){ .name = what,
				     .type = type,
				     .key_size = key_size,
				     .value_size = value_size,
				     .max_entries = max_entries,
				     .flags = flags };
	err = vz_map_init(&p->native, nworkers);
	CHECK(!err, "%s: vz_map_init: %d", what, err);
	p->kfd = bpf_map_create(type, NULL, key_size, value_size, max_entries,
				&opts);
}

static void pair_free(struct pair *p)
{
	vz_map_free(&p->native);
	if (p->kfd >= 0)
		close(p->kfd);
}

/* update from the control plane on both; same return code */
static int both_update(struct pair *p, const void *key, const void *value,
		       __u64 flags)
{
	int nret = vz_map_write(&p->native, key, value, flags);
	int kret;

	if (p->kfd >= 0) {
		kernel_compared++;
		kret = bpf_map_update_elem(p->kfd, key, value, flags) ? -errno
								      : 0;
		CHECK(nret == kret, "%s: update: native %d, kernel %d", p->what,
		      nret, kret);
	}
	return nret;
}

static int both_delete(struct pair *p, const void *key)
{
	int nret = vz_map_delete_elem(&p->native, key);
	int kret;

	if (p->kfd >= 0) {
		kernel_compared++;
		kret = bpf_map_delete_elem(p->kfd, key) ? -errno : 0;
		CHECK(nret == kret, "%s: delete: native %d, kernel %d", p->what,
		      nret, kret);
	}
	return nret;
}

/* lookup on both; same presence and bytes (size bytes of value) */
static int both_read(struct pair *p, const void *key, void *value, size_t size)
{
	__u8 kvalue[4096];
	int nret = vz_map_read(&p->native, key, value);
	int kret;

	if (p->kfd >= 0) {
		kernel_compared++;
		kret = bpf_map_lookup_elem(p->kfd, key, kvalue) ? -errno : 0;
		CHECK(nret == kret, "%s: lookup: native %d, kernel %d", p->what,
		      nret, kret);
		if (!nret && !kret)
			CHECK(!memcmp(value, kvalue, size),
			      "%s: lookup: values differ", p->what);
	}
	return nret;
}

static void test_array(void)
{
	struct pair p;
	__u32 key, value, got;

	pair_init(&p, "array", BPF_MAP_TYPE_ARRAY, 4, 4, 8, 0, 1);
	key = 3;
	value = 42;
	CHECK(both_update(&p, &key, &value, BPF_ANY) == 0, "array update");
	CHECK(both_read(&p, &key, &got, 4) == 0 && got == 42, "array read");
	CHECK(*(__u32 *)vz_map_lookup_elem(&p.native, &key) == 42,
	      "inline lookup");
	CHECK(both_update(&p, &key, &value, BPF_NOEXIST) == -EEXIST,
	      "array slots always exist");
	CHECK(both_update(&p, &key, &value, BPF_EXIST) == 0, "array EXIST");
	key = 8;
	CHECK(both_update(&p, &key, &value, BPF_ANY) == -E2BIG,
	      "array out of range");
	CHECK(both_read(&p, &key, &got, 4) == -ENOENT, "array read oor");
	CHECK(!vz_map_lookup_elem(&p.native, &key), "inline lookup oor");
	key = 0;
	CHECK(both_delete(&p, &key) == -EINVAL, "array delete");
	CHECK(both_update(&p, &key, &value, 7) == -EINVAL, "bad flags");
	pair_free(&p);
}

static void test_percpu_array(void)
{
	struct vz_map m = { .name = "pcpu",
			    .type = BPF_MAP_TYPE_PERCPU_ARRAY,
			    .key_size = 4,
			    .value_size = 12,
			    .max_entries = 4 };
	__u8 all[3 * 16];
	__u32 key = 2, *v, w;

	CHECK(!vz_map_init(&m, 3), "percpu init");
	CHECK(m.value_stride == 16, "values rounded up to 8 like BPF");
	for (w = 0; w < 3; w++) {
		vz_worker_id = w;
		v = vz_map_lookup_elem(&m, &key);
		CHECK(v != NULL, "percpu lookup");
		if (v)
			*v = 100 + w;
	}
	vz_worker_id = 1;
	v = vz_map_lookup_elem(&m, &key);
	CHECK(v && *v == 101, "each worker has its own copy");
	CHECK(!vz_map_read(&m, &key, all), "percpu read");
	for (w = 0; w < 3; w++)
		CHECK(*(__u32 *)(all + w * 16) == 100 + w,
		      "read gives every worker, stride apart (worker %u)", w);
	vz_worker_id = 0;
	vz_map_free(&m);
}

static void test_hash(void)
{
	struct pair p;
	__u64 key, value, got;

	pair_init(&p, "hash", BPF_MAP_TYPE_HASH, 8, 8, 4, 0, 1);
	for (key = 1; key <= 4; key++) {
		value = key * 10;
		CHECK(both_update(&p, &key, &value, BPF_NOEXIST) == 0,
		      "hash insert %llu", (unsigned long long)key);
	}
	key = 5;
	CHECK(both_update(&p, &key, &value, BPF_ANY) == -E2BIG, "hash full");
	key = 2;
	CHECK(both_update(&p, &key, &value, BPF_NOEXIST) == -EEXIST,
	      "hash NOEXIST");
	key = 9;
	CHECK(both_update(&p, &key, &value, BPF_EXIST) == -ENOENT,
	      "hash EXIST");
	key = 3;
	CHECK(both_read(&p, &key, &got, 8) == 0 && got == 30, "hash read");
	CHECK(both_delete(&p, &key) == 0, "hash delete");
	CHECK(both_delete(&p, &key) == -ENOENT, "hash delete twice");
	CHECK(both_read(&p, &key, &got, 8) == -ENOENT, "hash read deleted");
	key = 5;
	value = 55;
	CHECK(both_update(&p, &key, &value, BPF_ANY) == 0,
	      "hash room after delete");
	CHECK(both_read(&p, &key, &got, 8) == 0 && got == 55, "hash read 5");
	pair_free(&p);
}

static void test_lru(void)
{
	struct vz_map m = { .name = "lru",
			    .type = BPF_MAP_TYPE_LRU_HASH,
			    .key_size = 4,
			    .value_size = 4,
			    .max_entries = 3 };
	__u32 key, value = 1;

	CHECK(!vz_map_init(&m, 1), "lru init");
	for (key = 1; key <= 3; key++)
		CHECK(!vz_map_update_elem(&m, &key, &value, BPF_ANY),
		      "lru insert");
	key = 1;
	CHECK(vz_map_lookup_elem(&m, &key) != NULL, "lru touch 1");
	key = 4;
	CHECK(!vz_map_update_elem(&m, &key, &value, BPF_ANY),
	      "a full LRU map makes room");
	key = 2;
	CHECK(!vz_map_lookup_elem(&m, &key), "least recently used (2) evicted");
	key = 1;
	CHECK(vz_map_lookup_elem(&m, &key) != NULL, "recently used (1) kept");
	vz_map_free(&m);
}

struct lpm4 {
	__u32 prefixlen;
	__u8 addr[4];
};

static void test_lpm(void)
{
	static const struct {
		__u32 plen;
		__u8 addr[4];
		__u32 value;
	} routes[] = {
		{ 0, { 0, 0, 0, 0 }, 1 },	{ 15, { 198, 18, 0, 0 }, 2 },
		{ 24, { 198, 18, 1, 0 }, 3 },	{ 32, { 198, 18, 1, 7 }, 4 },
		{ 23, { 198, 19, 255, 0 }, 5 }, /* host bits are ignored */
	};
	static const struct {
		__u8 addr[4];
		__u32 want;
	} lookups[] = {
		{ { 198, 18, 1, 7 }, 4 }, { { 198, 18, 1, 8 }, 3 },
		{ { 198, 18, 2, 1 }, 2 }, { { 198, 19, 254, 1 }, 5 },
		{ { 198, 19, 0, 1 }, 2 }, { { 10, 0, 0, 1 }, 1 },
	};
	struct lpm4 key;
	struct pair p;
	__u32 got;
	size_t i;

	pair_init(&p, "lpm", BPF_MAP_TYPE_LPM_TRIE, sizeof(key), 4, 16,
		  BPF_F_NO_PREALLOC, 1);
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		key.prefixlen = routes[i].plen;
		memcpy(key.addr, routes[i].addr, 4);
		CHECK(both_update(&p, &key, &routes[i].value, BPF_ANY) == 0,
		      "lpm insert %zu", i);
	}
	for (i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
		key.prefixlen = 32;
		memcpy(key.addr, lookups[i].addr, 4);
		got = 0;
		CHECK(both_read(&p, &key, &got, 4) == 0 &&
			      got == lookups[i].want,
		      "lpm lookup %zu: got %u, want %u", i, got,
		      lookups[i].want);
	}
	key.prefixlen = 33;
	CHECK(both_update(&p, &key, &got, BPF_ANY) == -EINVAL,
	      "lpm prefix too long");
	key.prefixlen = 24;
	memcpy(key.addr, (__u8[]){ 198, 18, 1, 0 }, 4);
	CHECK(both_delete(&p, &key) == 0, "lpm delete");
	CHECK(both_delete(&p, &key) == -ENOENT, "lpm delete twice");
	key.prefixlen = 32;
	memcpy(key.addr, (__u8[]){ 198, 18, 1, 8 }, 4);
	CHECK(both_read(&p, &key, &got, 4) == 0 && got == 2,
	      "lpm falls back to the /15");
	pair_free(&p);
}

static void test_next_key(void)
{
	__u32 key, next, value = 0, seen = 0, n = 0;
	struct vz_map m = { .name = "iter",
			    .type = BPF_MAP_TYPE_HASH,
			    .key_size = 4,
			    .value_size = 4,
			    .max_entries = 8 };
	const __u32 *prev = NULL;

	CHECK(!vz_map_init(&m, 1), "iter init");
	for (key = 0; key < 5; key++)
		vz_map_update_elem(&m, &key, &value, BPF_ANY);
	while (!vz_map_next_key(&m, prev, &next)) {
		seen |= 1u << next;
		key = next;
		prev = &key;
		CHECK(++n <= 5, "iteration ends");
		if (n > 5)
			break;
	}
	CHECK(seen == 0x1f, "every key seen once (0x%x)", seen);
	vz_map_free(&m);
}

/*
 * Iteration stops at the highest node ever used (a dump of a big table
 * holding a few entries is quick): it must still reach entries an LPM map
 * put in nodes freed late (reused last, so past the first ones used).
 */
static void test_next_key_after_churn(void)
{
	struct lpm4 key = { .prefixlen = 32 }, next;
	struct vz_map m = { .name = "churn",
			    .type = BPF_MAP_TYPE_LPM_TRIE,
			    .key_size = sizeof(struct lpm4),
			    .value_size = 4,
			    .max_entries = 8,
			    .flags = BPF_F_NO_PREALLOC };
	__u32 value = 0, i, seen = 0, n = 0;
	const struct lpm4 *prev = NULL;

	CHECK(!vz_map_init(&m, 1), "churn init");
	/* nodes 0-2, then free 0 and 1: an LPM map queues them behind the
	 * never-used nodes, so the next four entries land in nodes 3-6 */
	for (i = 0; i < 3; i++) {
		key.addr[3] = (__u8)i;
		CHECK(!vz_map_update_elem(&m, &key, &value, BPF_ANY),
		      "churn insert %u", i);
	}
	for (i = 0; i < 2; i++) {
		key.addr[3] = (__u8)i;
		CHECK(!vz_map_delete_elem(&m, &key), "churn delete %u", i);
	}
	for (i = 8; i < 12; i++) {
		key.addr[3] = (__u8)i;
		CHECK(!vz_map_update_elem(&m, &key, &value, BPF_ANY),
		      "churn insert %u", i);
	}
	while (!vz_map_next_key(&m, prev, &next) && n++ < 8) {
		seen |= 1u << next.addr[3];
		key = next;
		prev = &key;
	}
	CHECK(seen == 0xf04 && n == 5,
	      "after churn, every key seen once (0x%x, %u)", seen, n);
	vz_map_free(&m);
}

/*
 * Several workers and a control-plane writer at once, as on the userspace
 * backends: per-CPU values are per worker (no count lost without atomics),
 * and the shared hash, LRU and LPM maps stay consistent while the main
 * thread inserts and deletes under the workers. Run under ASan and UBSan by
 * the sanitize build too.
 */
#define CONC_WORKERS 2
#define CONC_ROUNDS 200000
#define CONC_KEYS 64 /* divides CONC_ROUNDS: every key counted alike */
_Static_assert(CONC_ROUNDS % CONC_KEYS == 0, "keys share the rounds evenly");

static struct vz_map conc_percpu, conc_lru, conc_lpm;

static void *conc_worker(void *arg)
{
	struct lpm4 probe = { .prefixlen = 32, .addr = { 10, 0, 0, 0 } };
	__u32 i, key, value;
	__u64 *count;

	vz_worker_id = (__u32)(unsigned long)arg;
	for (i = 0; i < CONC_ROUNDS; i++) {
		key = i % CONC_KEYS;
		count = vz_map_lookup_elem(&conc_percpu, &key);
		if (count)
			(*count)++; /* this worker's copy: no atomics needed */
		key = (i * 2654435761u) % 1024;
		value = i;
		vz_map_update_elem(&conc_lru, &key, &value, BPF_ANY);
		vz_map_lookup_elem(&conc_lru, &key);
		probe.addr[3] = (__u8)i;
		vz_map_lookup_elem(&conc_lpm, &probe);
	}
	return NULL;
}

static void test_concurrent_workers_and_writer(void)
{
	__u64 copies[CONC_WORKERS], zero[CONC_WORKERS] = { 0 }, total;
	struct lpm4 prefix = { .prefixlen = 24, .addr = { 10, 0, 0, 0 } };
	pthread_t thread[CONC_WORKERS];
	__u32 key, next, n, w, value = 7;
	unsigned long i;

	conc_percpu = (struct vz_map){ .name = "conc_percpu",
				       .type = BPF_MAP_TYPE_PERCPU_HASH,
				       .key_size = 4,
				       .value_size = 8,
				       .max_entries = CONC_KEYS };
	conc_lru = (struct vz_map){ .name = "conc_lru",
				    .type = BPF_MAP_TYPE_LRU_HASH,
				    .key_size = 4,
				    .value_size = 4,
				    .max_entries = 128 };
	conc_lpm = (struct vz_map){ .name = "conc_lpm",
				    .type = BPF_MAP_TYPE_LPM_TRIE,
				    .key_size = sizeof(struct lpm4),
				    .value_size = 4,
				    .max_entries = 16,
				    .flags = BPF_F_NO_PREALLOC };
	CHECK(!vz_map_init(&conc_percpu, CONC_WORKERS) &&
		      !vz_map_init(&conc_lru, CONC_WORKERS) &&
		      !vz_map_init(&conc_lpm, CONC_WORKERS),
	      "concurrent maps init");
	/* the control plane creates the per-CPU keys, zero in every copy */
	for (key = 0; key < CONC_KEYS; key++)
		CHECK(!vz_map_write(&conc_percpu, &key, zero, BPF_ANY),
		      "percpu hash create %u", key);
	for (i = 0; i < CONC_WORKERS; i++)
		pthread_create(&thread[i], NULL, conc_worker, (void *)i);
	/* ...and keeps writing while the workers run */
	for (i = 0; i < 20000; i++) {
		prefix.addr[2] = (__u8)(i % 8);
		vz_map_update_elem(&conc_lpm, &prefix, &value, BPF_ANY);
		prefix.addr[2] = (__u8)((i + 4) % 8);
		vz_map_delete_elem(&conc_lpm, &prefix);
		key = (__u32)(i % 1024);
		vz_map_delete_elem(&conc_lru, &key);
	}
	for (i = 0; i < CONC_WORKERS; i++)
		pthread_join(thread[i], NULL);
	for (total = 0, key = 0; key < CONC_KEYS; key++) {
		CHECK(!vz_map_read(&conc_percpu, &key, copies), "percpu read");
		for (w = 0; w < CONC_WORKERS; w++) {
			CHECK(copies[w] == CONC_ROUNDS / CONC_KEYS,
			      "worker %u's count for key %u: %llu", w, key,
			      (unsigned long long)copies[w]);
			total += copies[w];
		}
	}
	CHECK(total == (__u64)CONC_WORKERS * CONC_ROUNDS,
	      "per-worker counts add up: %llu", (unsigned long long)total);
	/* the LRU map never holds more than it may, and walks cleanly */
	for (n = 0, key = ~0u;
	     !vz_map_next_key(&conc_lru, n ? &key : NULL, &next); key = next)
		n++;
	CHECK(n <= 128, "lru holds %u of at most 128", n);
	vz_map_free(&conc_percpu);
	vz_map_free(&conc_lru);
	vz_map_free(&conc_lpm);
}

int main(void)
{
	test_array();
	test_percpu_array();
	test_hash();
	test_lru();
	test_lpm();
	test_next_key();
	test_next_key_after_churn();
	test_concurrent_workers_and_writer();
	if (geteuid() == 0)
		CHECK(kernel_compared > 30,
		      "as root, kernel maps are compared "
		      "(%d operations)",
		      kernel_compared);
	printf("%d operations compared with kernel maps%s\n", kernel_compared,
	       geteuid() ? " (not root: none)" : "");
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("native maps: all checks passed\n");
	return 0;
}
