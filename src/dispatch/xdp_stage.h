/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The dispatch stage on XDP: a small program on the interface
 * (dispatch.bpf.c, vz_xdp_dispatch) hashes each frame's flow with the RSS
 * Toeplitz hash (the one src/dispatch/toeplitz.c computes), picks a CPU by
 * policy and redirects the frame through a cpumap to that CPU, where the NF
 * runs as the cpumap's program. The policies are the userspace dispatcher's
 * (src/dispatch/dispatch.h):
 *
 *   rss-mod        active[hash % nactive] (Shenango).
 *   flow-affinity  a flow table (LRU hash, key the 5-tuple) keeps each flow
 *                  on its CPU (Calisto). A flow whose CPU was deactivated
 *                  stays there while busy (seen within drain_ns: frames may
 *                  still be queued there, moving would reorder) and moves to
 *                  the least-loaded active CPU once idle. A flow idle longer
 *                  than aging_ns is new again. Load: live flows per CPU.
 *   buckets        512 hash buckets, each owned by a CPU; userspace moves
 *                  the fewest buckets from the busiest to the idlest CPU
 *                  each interval (RSS++) and the buckets of a deactivated
 *                  CPU. A bucket changes CPU only once idle for drain_ns.
 *
 * This header is shared by the BPF program and the loader; the loader's
 * API is below, outside the BPF build.
 */
#ifndef VZ_XDP_DISPATCH_H
#define VZ_XDP_DISPATCH_H

#include <linux/types.h>

#include "dispatch/policy.h"

/* The policy's limits and names are policy.h's; these name them as CPUs. */
#define VZ_DSP_MAX_CPUS VZ_DISPATCH_MAX_WORKERS
#define VZ_DSP_BUCKETS VZ_DISPATCH_NBUCKETS
#define VZ_DSP_RSS_MOD VZ_DISPATCH_RSS_MOD
#define VZ_DSP_FLOW_AFFINITY VZ_DISPATCH_FLOW_AFFINITY
#define VZ_DSP_BUCKETS_POLICY VZ_DISPATCH_BUCKETS
#define VZ_DSP_ADAPTIVE VZ_DISPATCH_ADAPTIVE
#define VZ_DSP_FLOWS 65536
#define VZ_DSP_QSIZE 2048 /* frames queued per CPU in the cpumap */
#define VZ_DSP_DRAIN_NS 200000ull /* 200 us */
#define VZ_DSP_AGING_NS 1000000000ull /* 1 s */
/* flow-affinity: an idle flow moves when its CPU has more than this many
 * live flows above the least loaded one's */
#define VZ_DSP_MIGRATE_GAP 1

/*
 * The one element of the dsp_config array map. The policy's view: worker
 * index i is CPU i (the active CPUs are always 0..nactive-1), and its load
 * is the CPU's live flows, which the stage keeps and userspace recounts
 * each interval: the cpumap tells no frame's completion, so a flow counts
 * as busy while it was seen within drain_ns.
 */
struct vz_dsp_config {
	__u64 active_mask; /* bit c: CPU c is active */
	__u64 drain_ns;
	__u64 aging_ns;
	__u32 active[VZ_DSP_MAX_CPUS]; /* the active CPUs, nactive of them */
	struct vz_policy_view view;
};

/* Key of the flow map: the 5-tuple (addresses and ports in network order). */
struct vz_dsp_flow_key {
	__u8 src[16]; /* IPv4: the first 4 bytes */
	__u8 dst[16];
	__u16 sport; /* 0 when not UDP/TCP, or a fragment */
	__u16 dport;
	__u8 proto;
	__u8 family; /* 4, 6; 0 for anything that is not IP */
	__u8 pad[2];
};

struct vz_dsp_flow {
	__u64 last_seen; /* bpf_ktime_get_ns() of its last frame */
	__u32 cpu;
	__u32 pad;
};

/* Per-CPU counters of the dispatcher (dsp_counters). */
enum vz_dsp_counter {
	VZ_DSP_FLOWS_NEW = 0,
	VZ_DSP_FLOWS_MOVED, /* to another CPU while known */
	VZ_DSP_FLOWS_AGED, /* idle past aging_ns: placed again as new */
	VZ_DSP_BUCKETS_MOVED, /* buckets that switched CPU */
	VZ_DSP_NO_CPU, /* the chosen CPU had no cpumap entry: passed */
	VZ_DSP_COUNTERS,
};

#ifndef __bpf__
#include <stdbool.h>
#include <stddef.h>
#include <bpf/libbpf.h>

struct vz_xdp_dispatch;

struct vz_xdp_dispatch_stats {
	int policy;
	unsigned int workers; /* CPUs 0..workers-1 run the NF */
	unsigned int nactive;
	unsigned int active[VZ_DSP_MAX_CPUS];
	__u64 cpu_packets[VZ_DSP_MAX_CPUS]; /* frames sent to each CPU */
	__u64 counter[VZ_DSP_COUNTERS];
	__u64 buckets_requested; /* bucket moves asked by rebalancing */
	__u64 rebalances;
	__u64 flows; /* flow-affinity: live flows at the last tick */
};

/* policy.h's names -> enum vz_dispatch_policy; -1 else. */
int vz_xdp_dispatch_policy_parse(const char *name);
const char *vz_xdp_dispatch_policy_name(int policy);

/*
 * Can this machine and kernel run the dispatcher on CPUs 0..workers-1?
 * 0, or -errno and one line in err: workers out of range, a CPU offline,
 * no cpumap program support. Loads nothing that outlives the call.
 */
int vz_xdp_dispatch_check(unsigned int workers, char *err, size_t errlen);

/*
 * The dispatcher for `policy` on CPUs 0..workers-1, all active, with the
 * NF's (opened, not loaded) object as the cpumap program: loads the NF as
 * a cpumap program (BPF_XDP_CPUMAP; its maps stay the object's), fills the
 * cpumap and the dispatcher's maps. The dispatcher's object comes back
 * from vz_xdp_dispatch_object(), opened with its maps in place, for libxdp
 * to load and attach. NULL and one line in err on failure.
 */
struct vz_xdp_dispatch *vz_xdp_dispatch_open(int policy, unsigned int workers,
					     struct bpf_object *nf_obj,
					     char *err, size_t errlen);
struct bpf_object *vz_xdp_dispatch_object(struct vz_xdp_dispatch *d);
void vz_xdp_dispatch_close(struct vz_xdp_dispatch *d);

/*
 * CPUs 0..n-1 active from now on (1 <= n <= workers). Buckets: the
 * buckets of the CPUs left out are handed to the least loaded.
 */
int vz_xdp_dispatch_set_active(struct vz_xdp_dispatch *d, unsigned int n);

/*
 * Each interval: buckets rebalancing (the fewest buckets from the busiest
 * to the idlest active CPU when max > (1 + imbalance) * mean); flow
 * loads recounted from the flow map (flows the LRU evicted).
 */
void vz_xdp_dispatch_tick(struct vz_xdp_dispatch *d);

void vz_xdp_dispatch_read(struct vz_xdp_dispatch *d,
			  struct vz_xdp_dispatch_stats *s);

/* Frames sent to each of CPUs 0..workers-1 so far (the allocator's view). */
void vz_xdp_dispatch_sent(struct vz_xdp_dispatch *d, __u64 *sent);
#endif

#endif
