// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * vz_xdp_dispatch: the XDP dispatch stage (see dispatch.h). Every frame is
 * redirected through cpu_map to the CPU the policy picks; the NF runs there
 * as the cpumap's program.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "dispatch/flow_tuple.h"
#include "dispatch/xdp_stage.h"

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(max_entries, VZ_DSP_MAX_CPUS);
} cpu_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct vz_dsp_config);
	__uint(max_entries, 1);
} dsp_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct vz_dsp_flow_key);
	__type(value, struct vz_dsp_flow);
	__uint(max_entries, VZ_DSP_FLOWS);
} dsp_flows SEC(".maps");

/* frames sent to each CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_DSP_MAX_CPUS);
} dsp_cpu_pkts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_DSP_COUNTERS);
} dsp_counters SEC(".maps");

/* buckets: the CPU each bucket is on, the one userspace wants it on */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, VZ_DSP_BUCKETS);
} dsp_bkt_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, VZ_DSP_BUCKETS);
} dsp_bkt_next SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_DSP_BUCKETS);
} dsp_bkt_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_DSP_BUCKETS);
} dsp_bkt_pkts SEC(".maps");

/* policy.h's key, as NICs and src/dispatch/toeplitz.c use it. */
static const volatile __u8 rss_key[VZ_RSS_KEY_LEN] = VZ_RSS_KEY;

static __always_inline void count(__u32 counter)
{
	__u64 *c = bpf_map_lookup_elem(&dsp_counters, &counter);

	if (c)
		*c += 1;
}

static __always_inline void load_add(struct vz_dsp_config *cfg, __u32 cpu,
				     __s32 delta)
{
	__u32 *load = &cfg->view.load[cpu & (VZ_DSP_MAX_CPUS - 1)];

	/* userspace recounts each interval: never below zero meanwhile */
	if (delta < 0 && !*load)
		return;
	__sync_fetch_and_add(load, delta);
}

/*
 * flow-affinity and adaptive: policy.h decides from the flow's CPU and
 * whether it was seen within drain_ns (frames of it may still be queued
 * there); this keeps the flow table and the per-CPU loads.
 */
static __always_inline __u32 place_flow(struct vz_dsp_config *cfg,
					const struct vz_dsp_flow_key *key,
					__u32 hash)
{
	struct vz_dsp_flow *flow, fresh = {};
	__u64 now = bpf_ktime_get_ns(), idle = 0;
	__u32 cpu, worker = VZ_POLICY_NONE, event;

	flow = bpf_map_lookup_elem(&dsp_flows, key);
	if (flow) {
		worker = flow->cpu & (VZ_DSP_MAX_CPUS - 1);
		idle = now > flow->last_seen ? now - flow->last_seen : 0;
		if (idle > cfg->aging_ns) {
			/* forgotten: placed again as a new flow */
			load_add(cfg, worker, -1);
			count(VZ_DSP_FLOWS_AGED);
			worker = VZ_POLICY_NONE;
		}
	}
	cpu = vz_policy_pick_flow(&cfg->view, hash, worker,
				  worker != VZ_POLICY_NONE &&
					  idle < cfg->drain_ns,
				  bpf_get_prandom_u32(), &event);
	cpu &= VZ_DSP_MAX_CPUS - 1;
	if (worker == VZ_POLICY_NONE) {
		load_add(cfg, cpu, 1);
		count(VZ_DSP_FLOWS_NEW);
	} else if (cpu != worker) {
		load_add(cfg, worker, -1);
		load_add(cfg, cpu, 1);
		count(VZ_DSP_FLOWS_MOVED);
	}
	if (flow) {
		flow->cpu = cpu;
		flow->last_seen = now;
		return cpu;
	}
	fresh.cpu = cpu;
	fresh.last_seen = now;
	if (bpf_map_update_elem(&dsp_flows, key, &fresh, BPF_ANY))
		load_add(cfg, cpu, -1); /* not kept: not counted */
	return cpu;
}

/*
 * buckets: userspace sets where each bucket should go (dsp_bkt_next);
 * policy.h moves it once none of its frames can still be queued (not seen
 * for drain_ns). No flow state here, and no forced moves.
 */
static __always_inline __u32 buckets(struct vz_dsp_config *cfg, __u32 hash)
{
	__u32 b = hash & (VZ_DSP_BUCKETS - 1), event;
	__u32 *cpu = bpf_map_lookup_elem(&dsp_bkt_cpu, &b);
	__u32 *next = bpf_map_lookup_elem(&dsp_bkt_next, &b);
	__u64 *seen = bpf_map_lookup_elem(&dsp_bkt_seen, &b);
	__u64 *pkts = bpf_map_lookup_elem(&dsp_bkt_pkts, &b);
	__u64 now = bpf_ktime_get_ns();
	struct vz_policy_bucket bucket;

	if (!cpu || !next || !seen || !pkts)
		return cfg->active[0];
	bucket.owner = *cpu;
	bucket.pending = *next != *cpu ? *next : VZ_POLICY_NONE;
	bucket.pending_since = now;
	*cpu = vz_policy_bucket(&cfg->view, &bucket, VZ_POLICY_NONE, 0,
				*seen && now >= *seen &&
					now - *seen < cfg->drain_ns,
				now, cfg->drain_ns, 0, &event);
	if (event == VZ_POLICY_MOVED)
		count(VZ_DSP_BUCKETS_MOVED);
	*seen = now;
	*pkts += 1;
	return *cpu;
}

SEC("xdp.frags")
int vz_xdp_dispatch(struct xdp_md *ctx)
{
	struct vz_ctx c = { .xdp = ctx };
	struct vz_dsp_flow_key key = {};
	__u8 in[VZ_RSS_INPUT_MAX] = {};
	struct vz_dsp_config *cfg;
	__u32 zero = 0, hash, cpu, len;
	__u64 *pkts;
	long ret;

	cfg = bpf_map_lookup_elem(&dsp_config, &zero);
	if (!cfg || !cfg->view.nactive)
		return XDP_PASS; /* never: configured before attaching */
	len = vz_flow_tuple(&c, &key, in);
	hash = vz_policy_toeplitz(rss_key, in, len);
	switch (cfg->view.policy) {
	case VZ_DSP_FLOW_AFFINITY:
	case VZ_DSP_ADAPTIVE:
		cpu = place_flow(cfg, &key, hash);
		break;
	case VZ_DSP_BUCKETS_POLICY:
		cpu = buckets(cfg, hash);
		break;
	default:
		cpu = vz_policy_rss_mod(&cfg->view, hash);
	}
	cpu &= VZ_DSP_MAX_CPUS - 1;
	pkts = bpf_map_lookup_elem(&dsp_cpu_pkts, &cpu);
	if (pkts)
		*pkts += 1;
	ret = bpf_redirect_map(&cpu_map, cpu, XDP_PASS);
	if (ret != XDP_REDIRECT)
		count(VZ_DSP_NO_CPU);
	return (int)ret;
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
