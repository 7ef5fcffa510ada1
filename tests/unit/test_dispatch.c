// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dispatch stage's policies and the core allocator, without threads:
 * the RSS hash against Microsoft's published vectors, each policy's
 * choices, and a randomised run of FIFO workers whose number changes under
 * load, in which flow-affinity and buckets must reorder nothing and
 * rss-mod does.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dispatch/core_alloc.h"
#include "dispatch/dispatch.h"
#include "dispatch/toeplitz.h"

struct rss_vector {
	const char *src, *dst;
	__u16 sport, dport;
	__u32 with_ports, addrs_only;
};

/* "Verifying the RSS hash calculation", Microsoft's RSS documentation. */
static const struct rss_vector v4[] = {
	{ "66.9.149.187", "161.142.100.80", 2794, 1766, 0x51ccc178,
	  0x323e8fc2 },
	{ "199.92.111.2", "65.69.140.83", 14230, 4739, 0xc626b0ea, 0xd718262a },
	{ "24.19.198.95", "12.22.207.184", 12898, 38024, 0x5c2b394a,
	  0xd2d0a5de },
	{ "38.27.205.30", "209.142.163.6", 48228, 2217, 0xafc7327f,
	  0x82989176 },
	{ "153.39.163.191", "202.188.127.2", 44251, 1303, 0x10e828a2,
	  0x5d1809c5 },
};

static const struct rss_vector v6[] = {
	{ "3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", 2794, 1766, 0x40207d3d,
	  0x2cc18cd5 },
	{ "3ffe:501:8::260:97ff:fe40:efab", "ff02::1", 14230, 4739, 0xdde51bbf,
	  0x0f0c461c },
	{ "3ffe:1900:4545:3:200:f8ff:fe21:67cf", "fe80::200:f8ff:fe21:67cf",
	  44251, 38024, 0x02d1feef, 0x4b61e985 },
};

static size_t tuple(int family, const struct rss_vector *v, __u8 *out,
		    bool ports)
{
	size_t alen = family == AF_INET ? 4 : 16;
	__u16 sport = htons(v->sport), dport = htons(v->dport);

	inet_pton(family, v->src, out);
	inet_pton(family, v->dst, out + alen);
	if (!ports)
		return 2 * alen;
	memcpy(out + 2 * alen, &sport, 2);
	memcpy(out + 2 * alen + 2, &dport, 2);
	return 2 * alen + 4;
}

/* An Ethernet + IPv4 + UDP frame of the vector's tuple. */
static size_t udp4_frame(const struct rss_vector *v, __u8 *f, __u16 frag)
{
	memset(f, 0, 64);
	f[12] = 0x08;
	f[14] = 0x45;
	f[14 + 6] = (__u8)(frag >> 8);
	f[14 + 7] = (__u8)frag;
	f[14 + 9] = 17;
	tuple(AF_INET, v, f + 14 + 12, true); /* addresses, then ports */
	memmove(f + 34, f + 34, 4);
	return 64;
}

static void test_toeplitz(void)
{
	__u8 in[36], frame[64];
	size_t i, n;

	for (i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
		n = tuple(AF_INET, &v4[i], in, true);
		CHECK(vz_toeplitz(vz_rss_key, in, n) == v4[i].with_ports,
		      "IPv4 vector %zu with ports", i);
		n = tuple(AF_INET, &v4[i], in, false);
		CHECK(vz_toeplitz(vz_rss_key, in, n) == v4[i].addrs_only,
		      "IPv4 vector %zu addresses", i);
		udp4_frame(&v4[i], frame, 0);
		CHECK(vz_rss_hash_frame(frame, 64) == v4[i].with_ports,
		      "IPv4 frame %zu", i);
		udp4_frame(&v4[i], frame, 0x0010); /* a later fragment */
		CHECK(vz_rss_hash_frame(frame, 64) == v4[i].addrs_only,
		      "IPv4 fragment %zu hashes its addresses", i);
		CHECK(vz_rss_hash_frame(frame, 30) == 0, "cut short");
	}
	for (i = 0; i < sizeof(v6) / sizeof(v6[0]); i++) {
		n = tuple(AF_INET6, &v6[i], in, true);
		CHECK(vz_toeplitz(vz_rss_key, in, n) == v6[i].with_ports,
		      "IPv6 vector %zu with ports", i);
		n = tuple(AF_INET6, &v6[i], in, false);
		CHECK(vz_toeplitz(vz_rss_key, in, n) == v6[i].addrs_only,
		      "IPv6 vector %zu addresses", i);
	}
	memset(frame, 0, sizeof(frame));
	frame[12] = 0x08;
	frame[13] = 0x06; /* ARP */
	CHECK(vz_rss_hash_frame(frame, 64) == 0, "non-IP hashes 0");
}

static struct vz_dispatch *make_held(enum vz_dispatch_policy p, unsigned int w,
				     __u64 hold_ns)
{
	struct vz_dispatch_config cfg;

	vz_dispatch_config_default(&cfg, p, w);
	cfg.flow_slots = 1024;
	if (hold_ns)
		cfg.hold_ns = hold_ns;
	return vz_dispatch_new(&cfg);
}

static struct vz_dispatch *make(enum vz_dispatch_policy p, unsigned int w)
{
	return make_held(p, w, 0);
}

static void test_rss_mod(void)
{
	struct vz_dispatch *d = make(VZ_DISPATCH_RSS_MOD, 4);
	struct vz_dispatch_ticket t, late;
	struct vz_dispatch_stats s;
	__u32 h;

	for (h = 1; h < 200; h++) {
		CHECK(vz_dispatch_pick(d, h * 2654435761u, 0, &t) ==
			      h * 2654435761u % 4,
		      "rss-mod is hash %% n");
		vz_dispatch_done(d, h * 2654435761u % 4, &t);
	}
	/* A flow's frame queued on worker 3 when it is parked... */
	CHECK(vz_dispatch_pick(d, 7, 0, &t) == 3, "7 %% 4");
	vz_dispatch_set_active(d, 3);
	/* ...and its next frame goes to worker 1, finishing first. */
	CHECK(vz_dispatch_pick(d, 7, 1, &late) == 1, "7 %% 3");
	vz_dispatch_done(d, 1, &late);
	vz_dispatch_done(d, 3, &t);
	vz_dispatch_get_stats(d, &s);
	CHECK(s.reordered == 1, "rss-mod reordered %llu, want 1",
	      (unsigned long long)s.reordered);
	CHECK(s.flows_moved == 1, "one flow moved");
	CHECK(!vz_dispatch_in_flight(d, 1) && !vz_dispatch_in_flight(d, 3),
	      "nothing left in flight");
	vz_dispatch_free(d);
}

static void test_flow_affinity(void)
{
	struct vz_dispatch *d = make(VZ_DISPATCH_FLOW_AFFINITY, 4);
	struct vz_dispatch_ticket a[4], t, u;
	struct vz_dispatch_stats s;
	unsigned int w, first;

	/* New flows go to the least loaded: four busy flows, four workers. */
	for (w = 0; w < 4; w++)
		CHECK(vz_dispatch_pick(d, 100 + w, 0, &a[w]) == w,
		      "flow %u to worker %u", w, w);
	/* A fifth flow while worker 2 is the only idle one. */
	vz_dispatch_done(d, 2, &a[2]);
	CHECK(vz_dispatch_pick(d, 555, 0, &t) == 2, "least loaded");
	vz_dispatch_done(d, 2, &t);
	/* Same flow, same worker, whatever the load. */
	first = vz_dispatch_pick(d, 101, 1, &t);
	CHECK(first == 1, "flow 101 stays on 1");
	/* Park worker 3 while flow 103 has a frame there: it stays. */
	vz_dispatch_set_active(d, 3);
	CHECK(vz_dispatch_pick(d, 103, 2, &u) == 3, "busy flow stays");
	vz_dispatch_done(d, 3, &a[3]);
	vz_dispatch_done(d, 3, &u);
	/* Drained: the next frame moves it to an active worker. */
	w = vz_dispatch_pick(d, 103, 3, &u);
	CHECK(w < 3, "idle flow leaves the parked worker (went to %u)", w);
	vz_dispatch_done(d, w, &u);
	vz_dispatch_done(d, 0, &a[0]);
	vz_dispatch_done(d, 1, &a[1]);
	vz_dispatch_done(d, 1, &t);
	vz_dispatch_get_stats(d, &s);
	CHECK(s.reordered == 0, "flow-affinity reordered %llu",
	      (unsigned long long)s.reordered);
	CHECK(s.flows_moved == 1, "one flow moved, not %llu",
	      (unsigned long long)s.flows_moved);
	/* An idle flow follows the allocator onto a new, emptier worker:
	 * flow 100 (worker 0) gets a frame while worker 0 holds another
	 * flow's frame and worker 3 has just come back empty. */
	vz_dispatch_set_active(d, 4);
	vz_dispatch_pick(d, 100, 4, &a[0]); /* 0: stays, busy now */
	vz_dispatch_done(d, 0, &a[0]);
	first = vz_dispatch_pick(d, 777, 4, &t); /* new: least loaded, 0 */
	CHECK(first == 0, "new flow to worker 0, not %u", first);
	w = vz_dispatch_pick(d, 100, 5, &u);
	CHECK(w != 0, "idle flow left the busier worker");
	vz_dispatch_done(d, first, &t);
	vz_dispatch_done(d, w, &u);
	vz_dispatch_get_stats(d, &s);
	CHECK(s.flows_moved == 2 && s.reordered == 0, "moved %llu",
	      (unsigned long long)s.flows_moved);
	/* Idle entries age out. */
	vz_dispatch_tick(d, 10ull * 1000000000);
	for (w = 0; w < 20; w++)
		vz_dispatch_tick(d, 10ull * 1000000000);
	vz_dispatch_get_stats(d, &s);
	CHECK(s.flows == 0 && s.flows_aged == 6, "aged %llu of 6, %u left",
	      (unsigned long long)s.flows_aged, s.flows);
	vz_dispatch_free(d);
}

static void test_prepopulate(void)
{
	struct vz_dispatch *d = make(VZ_DISPATCH_FLOW_AFFINITY, 4);
	__u32 hashes[8] = { 11, 22, 33, 44, 55, 66, 77, 88 };
	struct vz_dispatch_stats s;
	unsigned int i;

	CHECK(!vz_dispatch_prepopulate(d, hashes, 8, 0), "prepopulate");
	vz_dispatch_get_stats(d, &s);
	CHECK(s.flows == 8, "8 flows in the table");
	for (i = 0; i < 8; i++) {
		struct vz_dispatch_ticket t;

		CHECK(vz_dispatch_pick(d, hashes[i], 1, &t) == i % 4,
		      "prepopulated flow %u spread evenly", i);
	}
	vz_dispatch_free(d);
}

static void test_buckets(void)
{
	struct vz_dispatch *d = make(VZ_DISPATCH_BUCKETS, 2);
	struct vz_dispatch_ticket t;
	struct vz_dispatch_stats s;
	__u64 now = 0;
	unsigned int i, w, before[2] = { 0 }, after[2] = { 0 };
	__u32 b;

	/* Load only even buckets: worker 0 owns them all at first. */
	vz_dispatch_tick(d, now);
	for (i = 0; i < 20000; i++) {
		b = (i % 64) * 2;
		w = vz_dispatch_pick(d, b, now, &t);
		before[w]++;
		vz_dispatch_done(d, w, &t);
	}
	CHECK(before[1] == 0, "worker 1 owns odd buckets");
	now += 2000000;
	vz_dispatch_tick(d, now);
	for (i = 0; i < 20000; i++) {
		b = (i % 64) * 2;
		w = vz_dispatch_pick(d, b, now, &t);
		after[w]++;
		vz_dispatch_done(d, w, &t);
	}
	vz_dispatch_get_stats(d, &s);
	CHECK(after[1] >= 9000 && after[1] <= 11000,
	      "rebalanced to about half: %u of 20000", after[1]);
	CHECK(s.buckets_moved >= 31 && s.buckets_moved <= 32,
	      "moved %llu buckets, the fewest is about 32",
	      (unsigned long long)s.buckets_moved);
	vz_dispatch_free(d);
}

/*
 * FIFO workers serving at random, the number of workers changing under
 * load; every flow's frames must complete in order for the policies that
 * promise it.
 */
static struct vz_dispatch_stats run_random(enum vz_dispatch_policy policy,
					   unsigned int seed,
					   unsigned int force_gap)
{
	enum { W = 8, QCAP = 1 << 17, FLOWS = 300, STEPS = 200000 };
	static struct vz_dispatch_ticket q[W][QCAP];
	unsigned int head[W] = { 0 }, tail[W] = { 0 }, w, step;
	struct vz_dispatch_config cfg;
	struct vz_dispatch *d;
	struct vz_dispatch_stats s;
	__u64 now = 0;

	vz_dispatch_config_default(&cfg, policy, W);
	cfg.force_gap = force_gap;
	d = vz_dispatch_new(&cfg);
	srand(seed);
	for (step = 0; step < STEPS; step++) {
		now += 1000;
		if (rand() % 2) {
			__u32 hash = (__u32)(rand() % FLOWS) * 2654435761u;
			struct vz_dispatch_ticket t;

			w = vz_dispatch_pick(d, hash, now, &t);
			q[w][tail[w]++ % QCAP] = t;
		} else {
			w = (unsigned int)rand() % W;
			if (head[w] != tail[w])
				vz_dispatch_done(d, w, &q[w][head[w]++ % QCAP]);
		}
		if (rand() % 2000 == 0)
			vz_dispatch_set_active(d, 1 + (unsigned)rand() % W);
		vz_dispatch_tick(d, now);
	}
	for (w = 0; w < W; w++)
		while (head[w] != tail[w])
			vz_dispatch_done(d, w, &q[w][head[w]++ % QCAP]);
	vz_dispatch_get_stats(d, &s);
	for (w = 0; w < W; w++)
		CHECK(!s.in_flight[w], "in flight at the end");
	vz_dispatch_free(d);
	return s;
}

/* The default force gap. */
static struct vz_dispatch_stats
random_run_forcing(enum vz_dispatch_policy policy, unsigned int seed)
{
	struct vz_dispatch_config cfg;

	vz_dispatch_config_default(&cfg, policy, 8);
	return run_random(policy, seed, cfg.force_gap);
}

static void test_no_reordering(void)
{
	/* Force gap 0: no forced moves at all. */
	struct vz_dispatch_stats rss = run_random(VZ_DISPATCH_RSS_MOD, 1, 0);
	struct vz_dispatch_stats fa =
		run_random(VZ_DISPATCH_FLOW_AFFINITY, 1, 0);
	struct vz_dispatch_stats bk = run_random(VZ_DISPATCH_BUCKETS, 1, 0);
	struct vz_dispatch_stats ad = run_random(VZ_DISPATCH_ADAPTIVE, 1, 0);
	/* The same runs with the default force gap: these random queues grow
	 * deep, so busy flows are forced off stuck workers, counted. */
	struct vz_dispatch_stats fa_forced =
		random_run_forcing(VZ_DISPATCH_FLOW_AFFINITY, 1);
	struct vz_dispatch_stats bk_forced =
		random_run_forcing(VZ_DISPATCH_BUCKETS, 1);

	CHECK(rss.reordered > 0, "rss-mod reorders when workers change");
	/* Without forced moves, nothing is ever reordered. */
	CHECK(fa.reordered == 0 && !fa.flows_forced,
	      "flow-affinity reordered %llu", (unsigned long long)fa.reordered);
	CHECK(bk.reordered == 0 && !bk.buckets_forced && !bk.flows_forced,
	      "buckets reordered %llu", (unsigned long long)bk.reordered);
	CHECK(ad.reordered == 0 && !ad.flows_forced, "adaptive reordered %llu",
	      (unsigned long long)ad.reordered);
	/* With them, the same runs reorder, and only as often as busy flows
	 * are forced away: each forced move is counted. */
	CHECK(fa_forced.flows_forced > 0 && fa_forced.reordered > 0,
	      "flow-affinity: %llu reordered, %llu forced",
	      (unsigned long long)fa_forced.reordered,
	      (unsigned long long)fa_forced.flows_forced);
	CHECK(bk_forced.flows_forced > 0 && bk_forced.reordered > 0,
	      "buckets: %llu reordered, %llu forced",
	      (unsigned long long)bk_forced.reordered,
	      (unsigned long long)bk_forced.flows_forced);
	CHECK(fa.flows_moved < rss.flows_moved,
	      "flow-affinity moves fewer flows (%llu vs %llu)",
	      (unsigned long long)fa.flows_moved,
	      (unsigned long long)rss.flows_moved);
	printf("random run: reordered rss-mod %llu, flow-affinity %llu, "
	       "buckets %llu; flows moved %llu, %llu, %llu\n",
	       (unsigned long long)rss.reordered,
	       (unsigned long long)fa.reordered,
	       (unsigned long long)bk.reordered,
	       (unsigned long long)rss.flows_moved,
	       (unsigned long long)fa.flows_moved,
	       (unsigned long long)bk.flows_moved);
}

static void test_core_alloc(void)
{
	struct vz_dispatch *d = make(VZ_DISPATCH_FLOW_AFFINITY, 4);
	struct vz_core_alloc_config cfg;
	struct vz_core_alloc a;
	struct vz_dispatch_ticket t[2];
	__u64 oldest[VZ_DISPATCH_MAX_WORKERS] = { 0 };

	vz_core_alloc_config_default(&cfg, 4);
	cfg.min_workers = 1;
	CHECK(!vz_core_alloc_init(&a, &cfg, 0), "init");
	vz_dispatch_set_active(d, 1);
	/* Two frames on worker 0, the second waiting since t=1000. */
	vz_dispatch_pick(d, 1, 1000, &t[0]);
	vz_dispatch_pick(d, 2, 1000, &t[1]);
	oldest[0] = 1000;
	CHECK(vz_core_alloc_tick(&a, d, 2000, oldest) == 1, "not behind yet");
	CHECK(vz_core_alloc_tick(&a, d, 5000, oldest) == 1, "not a check");
	CHECK(vz_core_alloc_tick(&a, d, 7000, oldest) == 2,
	      "6 us of queueing adds a worker");
	vz_dispatch_done(d, 0, &t[0]);
	vz_dispatch_done(d, 0, &t[1]);
	oldest[0] = 0;
	/* Idle, but not for park_idle yet. */
	CHECK(vz_core_alloc_tick(&a, d, 20000, oldest) == 2, "still 2");
	/* Idle 50 us, but a worker was added 53 us ago: the hysteresis. */
	CHECK(vz_core_alloc_tick(&a, d, 60000, oldest) == 2,
	      "no park within shrink_holdoff of a grow");
	CHECK(vz_core_alloc_tick(&a, d, 7000 + cfg.shrink_holdoff_ns, oldest) ==
		      1,
	      "idle and past the holdoff: parked one");
	CHECK(a.stats.grows == 1 && a.stats.shrinks == 1, "counted");
	cfg.park_idle_ns = 1;
	CHECK(vz_core_alloc_init(&a, &cfg, 0) == -1, "bad config refused");
	vz_dispatch_free(d);
}

int main(void)
{
	struct vz_dispatch_config bad;

	test_toeplitz();
	test_rss_mod();
	test_flow_affinity();
	test_prepopulate();
	test_buckets();
	test_no_reordering();
	test_core_alloc();
	vz_dispatch_config_default(&bad, VZ_DISPATCH_RSS_MOD, 65);
	CHECK(!vz_dispatch_new(&bad), "65 workers refused");
	bad.workers = 2;
	bad.flow_slots = 1000;
	CHECK(!vz_dispatch_new(&bad), "slots not a power of two refused");
	CHECK(vz_dispatch_policy_parse("flow-affinity") ==
		      VZ_DISPATCH_FLOW_AFFINITY,
	      "parse");
	CHECK(vz_dispatch_policy_parse("nope") == -1, "unknown policy");
	return failures ? 1 : 0;
}
