/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The dispatch policies' decisions, written once in restricted C: the XDP
 * stage (xdp_stage.bpf.c, clang -target bpf) and the native dispatcher
 * (dispatch.c, which the afxdp and dpdk dispatchers and vz-sim run) include
 * this header and nothing else decides where a frame goes. Each side keeps
 * its own state (BPF maps; plain arrays) and hands a decision its view of
 * it: the load of each active worker and what is known of the frame's flow.
 * Nothing here allocates, calls out, or loops beyond VZ_DISPATCH_MAX_WORKERS,
 * so the verifier accepts it as it is. tests/unit/test_policy_diff.c runs
 * recorded decisions through both builds and compares them.
 *
 * Workers are indices 0..nactive-1 into the dispatcher's worker list (the
 * XDP stage maps index i to its i-th CPU); the active ones are always the
 * first nactive, so an index names the same worker whatever the allocator
 * does.
 *
 *   rss-mod        hash % nactive (Shenango). Stateless; a change of
 *                  nactive moves most flows, and reorders the busy ones.
 *   flow-affinity  a flow stays on its worker while any frame of it may be
 *                  queued (so it is never reordered). Once none is, it may
 *                  move: to the least-loaded active worker, when its own has
 *                  more than migrate_gap frames more than that one, or has
 *                  been parked. A new flow goes to the least loaded. This is
 *                  how flows follow the core allocator both ways without
 *                  reordering (Calisto's and RSS++'s rule: move state only
 *                  when it is quiescent), and what keeps queues even.
 *   buckets        the hash space in VZ_DISPATCH_NBUCKETS buckets, each owned
 *                  by a worker (RSS++); a periodic rebalance picks the
 *                  buckets to move. A busy flow stays with its frames; a
 *                  bucket moves once none of its frames is in flight, or
 *                  after hold_ns if the caller still has forced moves to
 *                  spend (bounded, counted: those may reorder).
 *   adaptive       Calisto's future work, alternating by load: while the
 *                  workers keep up (the caller's periodic check clears
 *                  `spread`), an idle flow goes where rss-mod would put it,
 *                  which costs no scan of the workers; once queues build,
 *                  flow-affinity's placement. Busy flows stay put in both.
 */
#ifndef VZ_DISPATCH_POLICY_H
#define VZ_DISPATCH_POLICY_H

#include <linux/types.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define VZ_DISPATCH_MAX_WORKERS 64
#define VZ_DISPATCH_NBUCKETS 512
/* A flow or bucket with no worker yet. */
#define VZ_POLICY_NONE 0xffu

/* Named below, for the command line. */
enum vz_dispatch_policy {
	VZ_DISPATCH_RSS_MOD = 0,
	VZ_DISPATCH_FLOW_AFFINITY = 1,
	VZ_DISPATCH_BUCKETS = 2,
	VZ_DISPATCH_ADAPTIVE = 3,
	VZ_DISPATCH_POLICIES,
};

/* What a decision sees of the dispatcher. */
struct vz_policy_view {
	__u32 policy; /* enum vz_dispatch_policy */
	__u32 nactive; /* 1..VZ_DISPATCH_MAX_WORKERS */
	__u32 migrate_gap; /* frames: see flow-affinity */
	__u32 spread; /* adaptive: queues are building, place by load */
	/* a busy flow whose worker has more than this many frames above the
	 * least loaded moves anyway, if may_force: a forced move, counted (it
	 * may reorder). 0: never. Without it a worker that fell behind keeps
	 * every flow it has busy, and so keeps them all for good. */
	__u32 force_gap;
	__u32 may_force; /* the caller's budget of forced moves is not spent */
	/* 0: the least loaded of all active workers (a scan of nactive);
	 * 2: the less loaded of two drawn at random (power of two choices:
	 * constant cost per frame, most of the scan's balance) */
	__u32 choices;
	__u32 pad;
	/* workers compared by least-loaded scans (native only: the simulator
	 * charges the dispatcher for them) */
	__u64 compared;
	/* per worker index: frames in flight (native), or the XDP stage's
	 * estimate of its queue */
	__u32 load[VZ_DISPATCH_MAX_WORKERS];
};

/* A bucket's placement; in_flight and seen are the caller's to keep. */
struct vz_policy_bucket {
	__u32 owner; /* worker index */
	__u32 pending; /* where it goes once quiescent; VZ_POLICY_NONE */
	__u64 pending_since; /* ns */
};

/* What a decision did besides choosing, for the caller's counters. */
enum vz_policy_event {
	VZ_POLICY_STAYED = 0,
	VZ_POLICY_PLACED, /* a new flow */
	VZ_POLICY_MOVED, /* a known, quiescent flow or bucket changed worker */
	VZ_POLICY_FORCED, /* a bucket moved with frames in flight */
};

/*
 * The active worker with the fewest frames; the lowest index on a tie, so
 * light load gathers on the first workers and the allocator can park the
 * last ones. In BPF a global function: the verifier checks it once, not
 * its 64 iterations again on every path of every caller.
 */
#ifdef __bpf__
__attribute__((noinline)) __u32 vz_policy_least_loaded(struct vz_policy_view *v,
						       __u32 r)
#else
static inline __u32 vz_policy_least_loaded(struct vz_policy_view *v, __u32 r)
#endif
{
	__u32 i, best = 0, best_load, load, mask;

	if (!v) /* never; the verifier asks */
		return 0;
	if (v->choices == 2 && v->nactive > 2) {
		/* two candidates from r's halves, by multiply-shift */
		__u32 a = ((r & 0xffff) * v->nactive) >> 16;
		__u32 b = ((r >> 16) * v->nactive) >> 16;

#ifndef __bpf__
		v->compared += 2;
#endif
		a &= VZ_DISPATCH_MAX_WORKERS - 1;
		b &= VZ_DISPATCH_MAX_WORKERS - 1;
		if (v->load[b] < v->load[a] ||
		    (v->load[b] == v->load[a] && b < a))
			return b;
		return a;
	}
#ifndef __bpf__
	v->compared += v->nactive;
#endif
	best_load = v->load[0];

	for (i = 1; i < VZ_DISPATCH_MAX_WORKERS; i++) {
		if (i >= v->nactive)
			break;
		/* Branchless (the sign of a 64-bit difference): a branch per
		 * worker would be 2^64 paths for the verifier. */
		load = v->load[i];
		mask = -(__u32)(((__u64)load - (__u64)best_load) >> 63);
		/* ... which clang turns back into branches unless told not
		 * to look inside mask (libbpf's barrier_var). */
		__asm__ __volatile__("" : "+r"(mask));
		best = (i & mask) | (best & ~mask);
		best_load = (load & mask) | (best_load & ~mask);
	}
	return best;
}

/* Worker w's load; the mask tells the verifier w is in range. */
static __always_inline __u32 vz_policy_load(const struct vz_policy_view *v,
					    __u32 w)
{
	return v->load[w & (VZ_DISPATCH_MAX_WORKERS - 1)];
}

/* Is `worker` so far behind that its busy flows may be forced off it? A
 * cheap first test: its own queue alone exceeds the gap. */
static __always_inline int vz_policy_stuck(const struct vz_policy_view *v,
					   __u32 worker)
{
	return v->force_gap && v->may_force &&
	       worker < VZ_DISPATCH_MAX_WORKERS &&
	       vz_policy_load(v, worker) > v->force_gap;
}

static __always_inline __u32 vz_policy_rss_mod(const struct vz_policy_view *v,
					       __u32 hash)
{
	return v->nactive ? hash % v->nactive : 0;
}

/*
 * flow-affinity: `worker` is the flow's worker (VZ_POLICY_NONE for a new
 * flow), `busy` whether a frame of it may still be queued there.
 */
static __always_inline __u32 vz_policy_flow_affinity(struct vz_policy_view *v,
						     __u32 worker, int busy,
						     __u32 r, __u32 *event)
{
	__u32 best;

	if (worker < VZ_DISPATCH_MAX_WORKERS && busy) {
		if (!vz_policy_stuck(v, worker)) {
			*event = VZ_POLICY_STAYED; /* moving could reorder */
			return worker;
		}
		best = vz_policy_least_loaded(v, r);
		if (vz_policy_load(v, worker) <=
		    vz_policy_load(v, best) + v->force_gap) {
			*event = VZ_POLICY_STAYED;
			return worker;
		}
		*event = VZ_POLICY_FORCED;
		return best;
	}
	best = vz_policy_least_loaded(v, r);
	if (worker < v->nactive && worker < VZ_DISPATCH_MAX_WORKERS &&
	    vz_policy_load(v, worker) <=
		    vz_policy_load(v, best) + v->migrate_gap) {
		*event = VZ_POLICY_STAYED; /* its cache is warm there */
		return worker;
	}
	*event = worker < VZ_DISPATCH_MAX_WORKERS ? VZ_POLICY_MOVED
						  : VZ_POLICY_PLACED;
	return best;
}

/* adaptive: rss-mod's placement while !v->spread, flow-affinity's after. */
static __always_inline __u32 vz_policy_adaptive(struct vz_policy_view *v,
						__u32 hash, __u32 worker,
						int busy, __u32 r, __u32 *event)
{
	__u32 home;

	if (v->spread)
		return vz_policy_flow_affinity(v, worker, busy, r, event);
	if (worker < VZ_DISPATCH_MAX_WORKERS && busy) {
		*event = VZ_POLICY_STAYED;
		return worker;
	}
	home = vz_policy_rss_mod(v, hash);
	*event = worker == home			    ? VZ_POLICY_STAYED
		 : worker < VZ_DISPATCH_MAX_WORKERS ? VZ_POLICY_MOVED
						    : VZ_POLICY_PLACED;
	return home;
}

/*
 * buckets: a frame of a flow known to have frames queued on `worker`
 * (`busy`) follows them there, unless that worker is stuck (see
 * force_gap), when it goes where its bucket goes. Otherwise the bucket decides:
 * it goes to its pending worker first if it has one and either none of its
 * frames is in flight (`bucket_busy` false) or it has waited hold_ns and the
 * caller may force the move (counted: those may reorder). A dispatcher that
 * knows its flows (the native one) passes bucket_busy false, since the flows
 * already keep order: its buckets move at once and never by force.
 */
static __always_inline __u32 vz_policy_bucket(struct vz_policy_view *v,
					      struct vz_policy_bucket *b,
					      __u32 worker, int busy,
					      int bucket_busy, __u64 now,
					      __u64 hold_ns, int may_force,
					      __u32 *event)
{
	*event = VZ_POLICY_STAYED;
	if (worker < VZ_DISPATCH_MAX_WORKERS && busy) {
		__u32 to = b->pending < VZ_DISPATCH_MAX_WORKERS ? b->pending
								: b->owner;

		if (to == worker || !vz_policy_stuck(v, worker) ||
		    to >= VZ_DISPATCH_MAX_WORKERS ||
		    vz_policy_load(v, worker) <=
			    vz_policy_load(v, to) + v->force_gap)
			return worker;
		*event = VZ_POLICY_FORCED; /* the flow, not the bucket */
		return to;
	}
	if (b->pending >= VZ_DISPATCH_MAX_WORKERS)
		return b->owner;
	if (b->pending == b->owner) {
		b->pending = VZ_POLICY_NONE;
		return b->owner;
	}
	if (!bucket_busy) {
		*event = VZ_POLICY_MOVED;
	} else if (may_force && now - b->pending_since > hold_ns) {
		*event = VZ_POLICY_FORCED; /* its old worker never drains it */
	} else {
		return b->owner;
	}
	b->owner = b->pending;
	b->pending = VZ_POLICY_NONE;
	return b->owner;
}

/*
 * The worker for a frame under v->policy, for every policy but buckets
 * (whose state is a bucket, not a flow). `worker` and `busy` describe the
 * frame's flow as above; r is a random word (for v->choices).
 */
static __always_inline __u32 vz_policy_pick_flow(struct vz_policy_view *v,
						 __u32 hash, __u32 worker,
						 int busy, __u32 r,
						 __u32 *event)
{
	switch (v->policy) {
	case VZ_DISPATCH_FLOW_AFFINITY:
		return vz_policy_flow_affinity(v, worker, busy, r, event);
	case VZ_DISPATCH_ADAPTIVE:
		return vz_policy_adaptive(v, hash, worker, busy, r, event);
	default:
		*event = VZ_POLICY_STAYED;
		return vz_policy_rss_mod(v, hash);
	}
}

/*
 * One decision, as the native dispatcher records it (vz_dispatch_record)
 * for tests/unit/test_policy_diff.c, which replays it through this header
 * built for BPF and compares: the inputs, then what came out.
 */
enum vz_policy_record_kind {
	VZ_POLICY_RECORD_FLOW = 0, /* vz_policy_pick_flow */
	VZ_POLICY_RECORD_BUCKET = 1, /* vz_policy_bucket */
};

struct vz_policy_record {
	struct vz_policy_view view;
	struct vz_policy_bucket bucket;
	__u64 now, hold_ns;
	__u32 kind, hash, worker, busy, bucket_busy, may_force, r;
	/* out */
	__u32 out_worker, out_event, pad;
	struct vz_policy_bucket out_bucket;
};

/* Replays a record's decision on its own copies: what both builds run. */
static __always_inline void vz_policy_replay(struct vz_policy_record *rec)
{
	__u32 event = 0;

	rec->out_bucket = rec->bucket;
	if (rec->kind == VZ_POLICY_RECORD_BUCKET)
		rec->out_worker = vz_policy_bucket(
			&rec->view, &rec->out_bucket, rec->worker, rec->busy,
			rec->bucket_busy, rec->now, rec->hold_ns,
			rec->may_force, &event);
	else
		rec->out_worker =
			vz_policy_pick_flow(&rec->view, rec->hash, rec->worker,
					    rec->busy, rec->r, &event);
	rec->out_event = event;
}

#ifndef __bpf__
#include <string.h>

/* The names the command line and Python use (vz-sim --policies lists
 * them for Python): written here once, beside the enum. */
static const char *const vz_dispatch_policy_names[VZ_DISPATCH_POLICIES] = {
	[VZ_DISPATCH_RSS_MOD] = "rss-mod",
	[VZ_DISPATCH_FLOW_AFFINITY] = "flow-affinity",
	[VZ_DISPATCH_BUCKETS] = "buckets",
	[VZ_DISPATCH_ADAPTIVE] = "adaptive",
};

/* The policy called `name`, or -1. */
static inline int vz_dispatch_policy_parse(const char *name)
{
	int i;

	for (i = 0; i < VZ_DISPATCH_POLICIES; i++)
		if (!strcmp(name, vz_dispatch_policy_names[i]))
			return i;
	return -1;
}

static inline const char *vz_dispatch_policy_name(unsigned int policy)
{
	return policy < VZ_DISPATCH_POLICIES ? vz_dispatch_policy_names[policy]
					     : "?";
}
#endif

/* The RSS key (Microsoft's, as NICs ship it) and the Toeplitz hash, bit by
 * bit: the native build turns it into a table at start (toeplitz.c). */
#define VZ_RSS_KEY_LEN 40
#define VZ_RSS_INPUT_MAX 36 /* IPv6 addresses and ports */
#define VZ_RSS_KEY                                                            \
	{                                                                     \
		0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,   \
			0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, \
			0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, \
			0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, \
			0xac, 0x01, 0xfa,                                     \
	}

/*
 * For each set input bit, most significant first, XOR in the 32 key bits
 * that start at that bit's position. Branchless within a byte: 2^288 paths
 * would be too many for the verifier.
 */
static __always_inline __u32 vz_policy_toeplitz(const volatile __u8 *key,
						const __u8 *in, __u32 len)
{
	__u32 hash = 0, i;
	int bit;

	for (i = 0; i < VZ_RSS_INPUT_MAX; i++) {
		__u64 k;
		__u8 b;

		if (i >= len)
			break;
		k = (__u64)key[i] << 32 | (__u64)key[i + 1] << 24 |
		    (__u64)key[i + 2] << 16 | (__u64)key[i + 3] << 8 |
		    key[i + 4];
		b = in[i];
#ifdef __clang__
#pragma unroll
#endif
		for (bit = 0; bit < 8; bit++)
			hash ^= (__u32)(k >> (8 - bit)) &
				-(__u32)((b >> (7 - bit)) & 1);
	}
	return hash;
}

#endif
