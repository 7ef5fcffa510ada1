// SPDX-License-Identifier: BSD-2-Clause
/*
 * Native LPM maps against the simplest LPM there is: a list of rules,
 * scanned in full for every lookup. Random inserts, deletes and lookups over
 * heavily overlapping prefixes (default routes, host routes, covering and
 * covered prefixes, a map kept full), for 1-, 2-, 4-, 5- and 16-byte
 * addresses; every answer must be the reference's, and, when we may create
 * BPF maps (root), the kernel's LPM trie's too. Then readers look up without
 * a lock while a writer adds and removes prefixes under them.
 *
 * VZ_TEST_SEED=n replays a run; a failure prints the seed.
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

static unsigned long long seed = 0x5eed1e55;
static int kernel_compared;

#define MAX_DATA 16

static __thread __u64 rng_state; /* per thread: readers draw too */

static __u64 rnd(void)
{
	/* splitmix64 */
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static __u32 below(__u32 n)
{
	return (__u32)(rnd() % n);
}

struct lkey {
	__u32 prefixlen;
	__u8 data[MAX_DATA];
};

struct lval {
	__u32 id; /* which write put it there */
	__u32 check; /* ~id: a torn or stray value shows */
};

struct rule {
	__u32 plen;
	__u8 addr[MAX_DATA]; /* masked */
	struct lval val;
};

/* The reference LPM and the maps under test. */
struct lpm_case {
	const char *what;
	__u32 bytes; /* address bytes */
	__u32 bits;
	__u32 max;
	struct rule *rules; /* rules[0..n) */
	__u32 n;
	__u32 next_id;
	struct vz_map map;
	int kfd; /* kernel twin, or -1 */
	__u32 added, deleted, full, hits, misses; /* what a run covered */
};

static void mask(__u8 *addr, __u32 bytes, __u32 plen)
{
	__u32 i;

	for (i = 0; i < bytes; i++) {
		if (plen >= 8 * (i + 1))
			continue;
		addr[i] = plen <= 8 * i
				  ? 0
				  : addr[i] & (__u8)(0xff
						     << (8 - (plen - 8 * i)));
	}
}

static int covers(const __u8 *prefix, __u32 plen, const __u8 *addr)
{
	__u32 full = plen / 8, rest = plen % 8;

	if (memcmp(prefix, addr, full))
		return 0;
	return !rest || !((prefix[full] ^ addr[full]) & (0xff << (8 - rest)));
}

static int ref_find(const struct lpm_case *c, __u32 plen, const __u8 *masked)
{
	__u32 i;

	for (i = 0; i < c->n; i++)
		if (c->rules[i].plen == plen &&
		    !memcmp(c->rules[i].addr, masked, c->bytes))
			return (int)i;
	return -1;
}

/* The longest rule no longer than maxlen covering addr: a full scan. */
static const struct rule *ref_match(const struct lpm_case *c, const __u8 *addr,
				    __u32 maxlen)
{
	const struct rule *best = NULL;
	__u32 i;

	for (i = 0; i < c->n; i++) {
		const struct rule *r = &c->rules[i];

		if (r->plen <= maxlen && (!best || r->plen > best->plen) &&
		    covers(r->addr, r->plen, addr))
			best = r;
	}
	return best;
}

static int case_init(struct lpm_case *c, const char *what, __u32 bytes,
		     __u32 max)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	int err;

	memset(c, 0, sizeof(*c));
	c->what = what;
	c->bytes = bytes;
	c->bits = 8 * bytes;
	c->max = max;
	c->rules = calloc(max, sizeof(*c->rules));
	c->map = (struct vz_map){ .name = what,
				  .type = BPF_MAP_TYPE_LPM_TRIE,
				  .key_size = 4 + bytes,
				  .value_size = sizeof(struct lval),
				  .max_entries = max,
				  .flags = BPF_F_NO_PREALLOC };
	err = vz_map_init(&c->map, 1);
	CHECK(!err && c->rules, "%s: vz_map_init: %d", what, err);
	c->kfd = bpf_map_create(BPF_MAP_TYPE_LPM_TRIE, NULL, 4 + bytes,
				sizeof(struct lval), max, &opts);
	return err;
}

static void case_free(struct lpm_case *c)
{
	vz_map_free(&c->map);
	if (c->kfd >= 0)
		close(c->kfd);
	free(c->rules);
}

/* ---- operations on all three, checked against the reference -------------- */

static void do_update(struct lpm_case *c, const struct lkey *key, __u64 flags)
{
	struct lkey masked = *key;
	struct lval val;
	int want, got, kret, i = -1;

	if (flags > BPF_EXIST) {
		want = -EINVAL;
	} else if (key->prefixlen > c->bits) {
		want = -EINVAL;
	} else {
		mask(masked.data, c->bytes, key->prefixlen);
		i = ref_find(c, key->prefixlen, masked.data);
		if (i >= 0 && flags == BPF_NOEXIST)
			want = -EEXIST;
		else if (i < 0 && flags == BPF_EXIST)
			want = -ENOENT;
		else if (i < 0 && c->n == c->max)
			want = -ENOSPC;
		else
			want = 0;
	}
	val.id = ++c->next_id;
	val.check = ~val.id;
	got = vz_map_write(&c->map, key, &val, flags);
	CHECK(got == want, "%s: update /%u flags %llu: got %d, want %d",
	      c->what, key->prefixlen, (unsigned long long)flags, got, want);
	if (c->kfd >= 0) {
		kernel_compared++;
		kret = bpf_map_update_elem(c->kfd, key, &val, flags) ? -errno
								     : 0;
		CHECK(kret == want, "%s: kernel update /%u: %d, want %d",
		      c->what, key->prefixlen, kret, want);
	}
	c->full += want == -ENOSPC;
	if (want)
		return;
	if (i < 0) {
		c->added++;
		i = (int)c->n++;
		c->rules[i].plen = key->prefixlen;
		memcpy(c->rules[i].addr, masked.data, c->bytes);
	}
	c->rules[i].val = val;
}

static void do_delete(struct lpm_case *c, const struct lkey *key)
{
	struct lkey masked = *key;
	int want, got, kret, i = -1;

	if (key->prefixlen > c->bits) {
		want = -EINVAL;
	} else {
		mask(masked.data, c->bytes, key->prefixlen);
		i = ref_find(c, key->prefixlen, masked.data);
		want = i < 0 ? -ENOENT : 0;
	}
	got = vz_map_delete_elem(&c->map, key);
	CHECK(got == want, "%s: delete /%u: got %d, want %d", c->what,
	      key->prefixlen, got, want);
	if (c->kfd >= 0) {
		kernel_compared++;
		kret = bpf_map_delete_elem(c->kfd, key) ? -errno : 0;
		CHECK(kret == want, "%s: kernel delete /%u: %d, want %d",
		      c->what, key->prefixlen, kret, want);
	}
	if (i >= 0) {
		c->deleted++;
		c->rules[i] = c->rules[--c->n];
	}
}

static void print_addr(const struct lpm_case *c, const __u8 *addr)
{
	__u32 i;

	for (i = 0; i < c->bytes; i++)
		fprintf(stderr, "%s%02x", i ? ":" : " ", addr[i]);
	fputc('\n', stderr);
}

/* A lookup of addr with prefixlen plen, every way there is. */
static void do_lookup(struct lpm_case *c, const __u8 *addr, __u32 plen)
{
	const struct rule *want =
		plen <= c->bits ? ref_match(c, addr, plen) : NULL;
	struct lkey key = { .prefixlen = plen };
	const struct lval *v;
	struct lval got;
	int ret, before = failures;

	memcpy(key.data, addr, c->bytes);
	if (want)
		c->hits++;
	else
		c->misses++;
	v = vz_map_lookup_elem(&c->map, &key);
	if (!want)
		CHECK(!v, "%s: lookup /%u: found id %u, want none", c->what,
		      plen, v ? v->id : 0);
	else
		CHECK(v && v->id == want->val.id && v->check == ~v->id,
		      "%s: lookup /%u: got id %u, want id %u (rule /%u)",
		      c->what, plen, v ? v->id : 0, want->val.id, want->plen);
	ret = vz_map_read(&c->map, &key, &got);
	CHECK(ret == (want ? 0 : -ENOENT) && (!want || got.id == want->val.id),
	      "%s: read /%u: %d id %u, want id %u", c->what, plen, ret,
	      ret ? 0 : got.id, want ? want->val.id : 0);
	if (c->kfd >= 0) {
		kernel_compared++;
		ret = bpf_map_lookup_elem(c->kfd, &key, &got) ? -errno : 0;
		CHECK(ret == (want ? 0 : -ENOENT) &&
			      (!want || got.id == want->val.id),
		      "%s: kernel lookup /%u: %d id %u, want id %u", c->what,
		      plen, ret, ret ? 0 : got.id, want ? want->val.id : 0);
	}
	if (failures != before)
		print_addr(c, addr);
}

/* Every rule once through next_key, and nothing else; the same set as the
 * kernel's (whose order differs, and which keeps host bits as given). */
static void check_iteration(struct lpm_case *c)
{
	__u8 *seen = calloc(c->max, 1);
	struct lkey key, next, masked;
	__u32 steps = 0;
	int i, ret;

	for (ret = vz_map_next_key(&c->map, NULL, &next); !ret;
	     ret = vz_map_next_key(&c->map, &key, &next)) {
		masked = next;
		mask(masked.data, c->bytes, next.prefixlen);
		i = next.prefixlen <= c->bits
			    ? ref_find(c, next.prefixlen, masked.data)
			    : -1;
		CHECK(i >= 0 && !memcmp(masked.data, next.data, c->bytes),
		      "%s: next_key gave a key not in the map (/%u)", c->what,
		      next.prefixlen);
		if (i >= 0) {
			CHECK(!seen[i], "%s: next_key gave /%u twice", c->what,
			      next.prefixlen);
			seen[i] = 1;
		}
		key = next;
		/* host bits in the key given do not matter */
		if (key.prefixlen < c->bits)
			key.data[c->bytes - 1] |= 1;
		if (++steps > c->max)
			break;
	}
	CHECK(ret == -ENOENT && steps == c->n,
	      "%s: next_key walked %u keys (%d), map holds %u", c->what, steps,
	      ret, c->n);
	if (c->kfd >= 0) {
		memset(seen, 0, c->max);
		steps = 0;
		for (ret = bpf_map_get_next_key(c->kfd, NULL, &next); !ret;
		     ret = bpf_map_get_next_key(c->kfd, &key, &next)) {
			masked = next;
			mask(masked.data, c->bytes, next.prefixlen);
			i = ref_find(c, next.prefixlen, masked.data);
			CHECK(i >= 0 && !seen[i],
			      "%s: kernel next_key: /%u unknown or twice",
			      c->what, next.prefixlen);
			if (i >= 0)
				seen[i] = 1;
			key = next;
			if (++steps > c->max)
				break;
		}
		CHECK(steps == c->n, "%s: kernel walked %u keys, want %u",
		      c->what, steps, c->n);
	}
	free(seen);
}

/* ---- scenarios ----------------------------------------------------------- */

static struct lkey k(const struct lpm_case *c, __u32 plen, const __u8 *addr)
{
	struct lkey key = { .prefixlen = plen };

	memcpy(key.data, addr, c->bytes);
	return key;
}

/* Nested prefixes 0.0.0.0/0 .. 10.1.2.3/32; delete covering, then covered. */
static void test_nested4(void)
{
	static const __u32 plens[] = { 0, 8, 16, 23, 24, 25, 31, 32 };
	static const __u8 base[4] = { 10, 1, 2, 3 };
	static const __u8 probes[][4] = {
		{ 10, 1, 2, 3 },   { 10, 1, 2, 2 },   { 10, 1, 2, 0 },
		{ 10, 1, 2, 200 }, { 10, 1, 3, 9 },   { 10, 1, 4, 1 },
		{ 10, 2, 0, 0 },   { 11, 0, 0, 0 },   { 255, 255, 255, 255 },
		{ 0, 0, 0, 0 },	   { 10, 1, 2, 127 }, { 10, 1, 2, 128 },
	};
	struct lpm_case c;
	struct lkey key;
	__u32 i, j, order;

	if (case_init(&c, "nested4", 4, 16))
		goto out;
	/* every insertion order matters: longest first, then shortest */
	for (order = 0; order < 2; order++) {
		for (i = 0; i < 8; i++) {
			key = k(&c, plens[order ? i : 7 - i], base);
			do_update(&c, &key, BPF_NOEXIST);
			for (j = 0; j < sizeof(probes) / 4; j++)
				do_lookup(&c, probes[j], 32);
		}
		/* covering prefixes go first: the covered ones must stay */
		for (i = 0; i < 8; i++) {
			key = k(&c, plens[(i * 3) % 8], base);
			do_delete(&c, &key);
			for (j = 0; j < sizeof(probes) / 4; j++) {
				do_lookup(&c, probes[j], 32);
				do_lookup(&c, probes[j], 24);
			}
			check_iteration(&c);
		}
		REQUIRE(c.n == 0, "nested4: all deleted");
		do_lookup(&c, base, 32);
	}
	/* the default route alone, and a host route alone */
	key = k(&c, 0, (const __u8[]){ 1, 2, 3, 4 }); /* host bits ignored */
	do_update(&c, &key, BPF_ANY);
	do_lookup(&c, (const __u8[]){ 200, 1, 1, 1 }, 32);
	do_lookup(&c, (const __u8[]){ 200, 1, 1, 1 }, 0);
	do_lookup(&c, (const __u8[]){ 200, 1, 1, 1 }, 33);
	do_delete(&c, &key);
	key = k(&c, 32, (const __u8[]){ 198, 18, 0, 1 });
	do_update(&c, &key, BPF_ANY);
	do_lookup(&c, (const __u8[]){ 198, 18, 0, 1 }, 32);
	do_lookup(&c, (const __u8[]){ 198, 18, 0, 0 }, 32);
	do_lookup(&c, (const __u8[]){ 198, 18, 0, 1 }, 31);
	check_iteration(&c);
out:
	case_free(&c);
}

/* A full map: -ENOSPC for a new prefix only; the flags and -EINVAL. */
static void test_full_and_errors(void)
{
	static const __u8 a[16] = { 0xfd, 0x00, 0x01, 0x98, 0, 0x18 };
	struct lpm_case c;
	struct lkey key;
	__u32 i;

	if (case_init(&c, "full6", 16, 4))
		goto out;
	for (i = 0; i < 4; i++) {
		key = k(&c, 128 - 16 * i, a);
		do_update(&c, &key, BPF_NOEXIST);
	}
	REQUIRE(c.n == 4, "full6: 4 rules");
	key = k(&c, 1, a);
	do_update(&c, &key, BPF_ANY); /* -ENOSPC */
	do_update(&c, &key, BPF_NOEXIST); /* -ENOSPC */
	do_update(&c, &key, BPF_EXIST); /* -ENOENT */
	key = k(&c, 112, a);
	do_update(&c, &key, BPF_ANY); /* a new value: fits */
	do_update(&c, &key, BPF_EXIST);
	do_update(&c, &key, BPF_NOEXIST); /* -EEXIST */
	do_update(&c, &key, BPF_EXIST + 1); /* -EINVAL */
	key.prefixlen = 129;
	do_update(&c, &key, BPF_ANY); /* -EINVAL */
	do_delete(&c, &key); /* -EINVAL */
	do_lookup(&c, a, 129);
	key = k(&c, 96, a);
	do_delete(&c, &key);
	do_delete(&c, &key); /* -ENOENT */
	key = k(&c, 0, a);
	do_update(&c, &key, BPF_ANY); /* room again: the /0 */
	do_update(&c, &key, BPF_ANY);
	for (i = 0; i <= 128; i += 8)
		do_lookup(&c, a, i);
	do_lookup(&c, (const __u8[16]){ 0x20, 0x01, 0x0d, 0xb8 }, 128);
	check_iteration(&c);
out:
	case_free(&c);
}

/* An address sharing a random number of leading bits with one of a few
 * bases: prefixes overlap at every depth. */
static void rand_addr(const struct lpm_case *c, const __u8 bases[][MAX_DATA],
		      __u32 nbases, __u8 *addr)
{
	const __u8 *base = bases[below(nbases)];
	__u32 keep = below(c->bits + 1), i;

	for (i = 0; i < c->bytes; i++)
		addr[i] = (__u8)rnd();
	for (i = 0; i < keep; i++)
		if (((base[i / 8] ^ addr[i / 8]) >> (7 - i % 8)) & 1)
			addr[i / 8] ^= (__u8)(0x80 >> (i % 8));
}

static __u32 rand_plen(const struct lpm_case *c)
{
	__u32 r = below(1000);

	if (c->bits != 32)
		return below(c->bits + 1);
	/* a short prefix rewrites up to 2^24 first-level entries: rarely */
	if (r < 3)
		return below(8);
	if (r < 100)
		return 8 + below(8);
	if (r < 500)
		return 16 + below(9);
	return 24 + below(9); /* /25 and longer need a group */
}

/*
 * Random operations. The map's capacity is small, so it is full much of the
 * time; with few rules and many distinct regions, groups must be freed and
 * reused or the inserts would run out of them.
 */
static void test_random(const char *what, __u32 bytes, __u32 max, __u32 ops)
{
	__u8 bases[4][MAX_DATA], addr[MAX_DATA];
	struct lpm_case c;
	struct lkey key;
	__u32 op = 0, r, i, start = (__u32)failures;
	__u64 flags;

	if (case_init(&c, what, bytes, max))
		goto out;
	for (i = 0; i < 4 * MAX_DATA; i++)
		bases[i / MAX_DATA][i % MAX_DATA] = (__u8)rnd();
	for (op = 0; op < ops && (__u32)failures == start; op++) {
		r = below(100);
		rand_addr(&c, (const __u8(*)[MAX_DATA])bases, 4, addr);
		key = k(&c, rand_plen(&c), addr);
		if (r < 45) {
			flags = below(10) < 7 ? BPF_ANY : below(2) + 1;
			if (!below(200))
				flags = BPF_EXIST + 1 + below(4);
			if (!below(200))
				key.prefixlen = c.bits + 1 + below(64);
			do_update(&c, &key, flags);
		} else if (r < 75) {
			/* mostly a rule that exists, given with host bits */
			if (c.n && below(10) < 7) {
				i = below(c.n);
				key = k(&c, c.rules[i].plen, c.rules[i].addr);
				if (key.prefixlen < c.bits)
					key.data[c.bytes - 1] ^= 1;
			}
			if (!below(200))
				key.prefixlen = c.bits + 1;
			do_delete(&c, &key);
		} else {
			for (i = 0; i < 8; i++) {
				rand_addr(&c, (const __u8(*)[MAX_DATA])bases, 4,
					  addr);
				do_lookup(&c, addr, c.bits);
			}
			do_lookup(&c, addr, below(c.bits + 1));
			do_lookup(&c, addr, c.bits + 1);
			/* an address inside a rule, host bits random */
			if (c.n) {
				i = below(c.n);
				memcpy(addr, c.rules[i].addr, c.bytes);
				addr[c.bytes - 1] ^= (__u8)rnd();
				do_lookup(&c, addr, c.bits);
			}
		}
		if (op % 512 == 511)
			check_iteration(&c);
	}
	check_iteration(&c);
	/* empty it: everything answers nothing, every group is given back */
	while (c.n) {
		key = k(&c, c.rules[0].plen, c.rules[0].addr);
		do_delete(&c, &key);
	}
	for (i = 0; i < 64; i++) {
		rand_addr(&c, (const __u8(*)[MAX_DATA])bases, 4, addr);
		do_lookup(&c, addr, c.bits);
	}
	check_iteration(&c);
	printf("%s: %u operations: %u prefixes added, %u deleted, %u refused "
	       "as full; %u lookups found a prefix, %u none\n",
	       what, op, c.added, c.deleted, c.full, c.hits, c.misses);
out:
	if ((__u32)failures != start)
		fprintf(stderr, "%s: failed after %u operations\n", what, op);
	case_free(&c);
}

/*
 * Deep prefixes in a thousand different /24s through a 4-rule map: each
 * rule needs a group, so groups must come back on delete (4 at most live).
 */
static void test_group_reuse(void)
{
	struct lpm_case c;
	struct lkey key;
	__u8 addr[4];
	__u32 i;

	if (case_init(&c, "groups", 4, 4))
		goto out;
	for (i = 0; i < 4000; i++) {
		addr[0] = 100;
		addr[1] = (__u8)(i / 250);
		addr[2] = (__u8)(i % 250);
		addr[3] = (__u8)(i * 37);
		key = k(&c, 25 + i % 8, addr);
		do_update(&c, &key, BPF_NOEXIST);
		do_lookup(&c, addr, 32);
		if (c.n == 4) {
			key = k(&c, c.rules[0].plen, c.rules[0].addr);
			do_delete(&c, &key);
		}
		REQUIRE(c.n < 4, "groups: insert %u failed", i);
	}
out:
	case_free(&c);
}

/* ---- lock-free readers under a writer ------------------------------------ */

#define CONC_READERS 2
#define CONC_WRITES 60000
#define CONC_LIVE 48

struct conc_val {
	__u32 tag;
	__u32 plen;
	__u8 addr[4];
};

#define CONC_TAG 0x1f3a5c7eu

static struct vz_map conc_map;
static volatile int conc_done;
static __u64 conc_lookups[CONC_READERS], conc_bad[CONC_READERS];

/* 10.0.0.0/20 gets the churn; all of 10/8 is covered by a permanent rule */
static void conc_addr(__u8 *addr)
{
	__u32 r = (__u32)rnd();

	addr[0] = 10;
	addr[1] = (r >> 28) ? 0 : (__u8)(r >> 20);
	addr[2] = (__u8)((r >> 8) & 0x0f);
	addr[3] = (__u8)r;
}

/*
 * Nodes are not reused in this test (room for every write), so even a rule
 * deleted a moment ago still holds its own prefix: what a lookup gets must
 * cover the address. A group reused under it would not.
 */
static int conc_wrong(const struct conc_val *v, const __u8 *addr)
{
	return !v || v->tag != CONC_TAG || v->plen < 8 || v->plen > 32 ||
	       !covers(v->addr, v->plen, addr);
}

/* Reader 0 looks up one key at a time, the others a burst at a time
 * (vz_map_lookup_lpm_bulk(): its walk below the first level is its own). */
static void *conc_reader(void *arg)
{
	unsigned long me = (unsigned long)arg;
	struct lkey key = { .prefixlen = 32 };
	struct {
		__u32 prefixlen;
		__u8 addr[4];
	} burst[VZ_LPM_BULK];
	void *got[VZ_LPM_BULK];
	__u32 i, j;

	rng_state = seed + 1000 * (me + 1);
	while (!__atomic_load_n(&conc_done, __ATOMIC_ACQUIRE)) {
		for (i = 0; i < 256; i += VZ_LPM_BULK) {
			if (!me) {
				for (j = 0; j < VZ_LPM_BULK; j++) {
					conc_addr(key.data);
					conc_bad[me] += conc_wrong(
						vz_map_lookup_elem(&conc_map,
								   &key),
						key.data);
				}
				continue;
			}
			for (j = 0; j < VZ_LPM_BULK; j++) {
				burst[j].prefixlen = 32;
				conc_addr(burst[j].addr);
			}
			vz_map_lookup_lpm_bulk(&conc_map, burst, got,
					       VZ_LPM_BULK);
			for (j = 0; j < VZ_LPM_BULK; j++)
				conc_bad[me] +=
					conc_wrong(got[j], burst[j].addr);
		}
		conc_lookups[me] += 256;
	}
	return NULL;
}

static void test_concurrent(void)
{
	struct lkey live[CONC_LIVE], key = { .prefixlen = 8, .data = { 10 } };
	struct conc_val val = { .tag = CONC_TAG, .plen = 8, .addr = { 10 } };
	pthread_t reader[CONC_READERS];
	__u32 nlive = 0, i, j, r;
	__u64 total = 0, bad = 0;
	unsigned long t;
	int err;

	conc_map = (struct vz_map){ .name = "conc",
				    .type = BPF_MAP_TYPE_LPM_TRIE,
				    .key_size = 8,
				    .value_size = sizeof(struct conc_val),
				    .max_entries = CONC_WRITES + 2,
				    .flags = BPF_F_NO_PREALLOC };
	CHECK(!vz_map_init(&conc_map, 1), "conc init");
	CHECK(!vz_map_update_elem(&conc_map, &key, &val, BPF_NOEXIST),
	      "conc: the permanent 10.0.0.0/8");
	conc_done = 0;
	for (t = 0; t < CONC_READERS; t++)
		pthread_create(&reader[t], NULL, conc_reader, (void *)t);
	for (i = 0; i < CONC_WRITES; i++) {
		if (nlive == CONC_LIVE || (nlive && below(2))) {
			j = below(nlive);
			err = vz_map_delete_elem(&conc_map, &live[j]);
			CHECK(!err, "conc: delete: %d", err);
			live[j] = live[--nlive];
			continue;
		}
		r = below(100);
		key.prefixlen = r < 10 ? 9 + below(11) : 20 + below(13);
		conc_addr(key.data);
		mask(key.data, 4, key.prefixlen);
		val.plen = key.prefixlen;
		memcpy(val.addr, key.data, 4);
		err = vz_map_update_elem(&conc_map, &key, &val, BPF_NOEXIST);
		if (err == -EEXIST)
			continue;
		CHECK(!err, "conc: insert: %d", err);
		live[nlive++] = key;
	}
	__atomic_store_n(&conc_done, 1, __ATOMIC_RELEASE);
	for (t = 0; t < CONC_READERS; t++) {
		pthread_join(reader[t], NULL);
		total += conc_lookups[t];
		bad += conc_bad[t];
	}
	CHECK(!bad, "conc: %llu of %llu lock-free lookups were wrong",
	      (unsigned long long)bad, (unsigned long long)total);
	CHECK(total > 0, "conc: readers ran");
	printf("concurrent: %llu lookups beside %u writes, %llu wrong\n",
	       (unsigned long long)total, CONC_WRITES, (unsigned long long)bad);
	vz_map_free(&conc_map);
}

int main(void)
{
	const char *env = getenv("VZ_TEST_SEED");

	if (env)
		seed = strtoull(env, NULL, 0);
	rng_state = seed;
	test_nested4();
	test_full_and_errors();
	test_group_reuse();
	test_random("random1", 1, 24, 6000);
	test_random("random2", 2, 64, 6000);
	test_random("random4", 4, 96, 12000);
	test_random("random4-big", 4, 2048, 12000);
	test_random("random5", 5, 64, 6000);
	test_random("random16", 16, 96, 12000);
	test_concurrent();
	printf("%d operations compared with kernel LPM tries%s\n",
	       kernel_compared, geteuid() ? " (not root: none)" : "");
	if (failures) {
		fprintf(stderr, "%d check(s) failed (VZ_TEST_SEED=%#llx)\n",
			failures, seed);
		return 1;
	}
	printf("native LPM: all checks passed\n");
	return 0;
}
