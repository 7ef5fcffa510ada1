// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * vz_xdp_dispatch: the XDP dispatch stage (see dispatch.h). Every frame is
 * redirected through cpu_map to the CPU the policy picks; the NF runs there
 * as the cpumap's program.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "dispatch/xdp_stage.h"

#define ETH_P_8021AD_ 0x88a8
#define ETH_P_8021Q_ 0x8100
#define HASH_INPUT_MAX 36

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

/* flow-affinity: live flows per CPU, the load new flows are placed by */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __s64);
	__uint(max_entries, VZ_DSP_MAX_CPUS);
} dsp_load SEC(".maps");

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

/* Microsoft's RSS key, as NICs and src/dispatch/toeplitz.c use it. */
static const volatile __u8 rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
	0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
	0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
	0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

/*
 * Toeplitz: for each set input bit (most significant first), XOR in the 32
 * key bits that start at that bit's position.
 */
static __always_inline __u32 toeplitz(const __u8 *in, __u32 len)
{
	__u32 hash = 0, i;
	int bit;

	for (i = 0; i < HASH_INPUT_MAX; i++) {
		__u64 k;
		__u8 b;

		if (i >= len)
			break;
		k = (__u64)rss_key[i] << 32 | (__u64)rss_key[i + 1] << 24 |
		    (__u64)rss_key[i + 2] << 16 | (__u64)rss_key[i + 3] << 8 |
		    rss_key[i + 4];
		b = in[i];
		/* branchless: 2^288 paths would be too many for the verifier */
#pragma unroll
		for (bit = 0; bit < 8; bit++)
			hash ^= (__u32)(k >> (8 - bit)) &
				-(__u32)((b >> (7 - bit)) & 1);
	}
	return hash;
}

/*
 * The flow key and the RSS hash input of a frame: Ethernet (one VLAN tag),
 * IPv4 or IPv6; UDP and TCP ports when present and not a fragment, the
 * addresses alone otherwise. Returns the hash input's length, 0 for a frame
 * that is not IP (or is cut short), which hashes to 0.
 */
static __always_inline __u32 parse(struct xdp_md *ctx,
				   struct vz_dsp_flow_key *key, __u8 *in)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth), addrs, l4;
	__u16 proto;
	__u8 next;
	__u16 *ports;

	if ((void *)(eth + 1) > data_end)
		return 0;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q_) ||
	    proto == bpf_htons(ETH_P_8021AD_)) {
		if (data + sizeof(*eth) + 4 > data_end)
			return 0;
		proto = *(__u16 *)(data + sizeof(*eth) + 2);
		off += 4;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + off;

		if ((void *)(ip + 1) > data_end || ip->version != 4 ||
		    ip->ihl < 5)
			return 0;
		__builtin_memcpy(in, &ip->saddr, 4);
		__builtin_memcpy(in + 4, &ip->daddr, 4);
		__builtin_memcpy(key->src, &ip->saddr, 4);
		__builtin_memcpy(key->dst, &ip->daddr, 4);
		key->family = 4;
		key->proto = ip->protocol;
		addrs = 8;
		next = ip->protocol;
		/* fragments (first or later) hash the addresses alone */
		if (ip->frag_off & bpf_htons(0x3fff))
			return addrs;
		l4 = off + ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + off;

		if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
			return 0;
		__builtin_memcpy(in, &ip6->saddr, 16);
		__builtin_memcpy(in + 16, &ip6->daddr, 16);
		__builtin_memcpy(key->src, &ip6->saddr, 16);
		__builtin_memcpy(key->dst, &ip6->daddr, 16);
		key->family = 6;
		key->proto = ip6->nexthdr;
		addrs = 32;
		next = ip6->nexthdr;
		l4 = off + sizeof(*ip6);
	} else {
		return 0;
	}
	if (next != IPPROTO_TCP && next != IPPROTO_UDP)
		return addrs;
	l4 &= 0xff; /* at most 18 + 60: tells the verifier so */
	ports = data + l4;
	if ((void *)(ports + 2) > data_end)
		return addrs;
	key->sport = ports[0];
	key->dport = ports[1];
	__builtin_memcpy(in + addrs, ports, 4);
	return addrs + 4;
}

static __always_inline void count(__u32 counter)
{
	__u64 *c = bpf_map_lookup_elem(&dsp_counters, &counter);

	if (c)
		*c += 1;
}

static __always_inline int is_active(const struct vz_dsp_config *cfg, __u32 cpu)
{
	return cpu < VZ_DSP_MAX_CPUS && (cfg->active_mask >> cpu) & 1;
}

static __always_inline __u32 active_cpu(const struct vz_dsp_config *cfg,
					__u32 i)
{
	return cfg->active[i & (VZ_DSP_MAX_CPUS - 1)];
}

static __always_inline void load_add(__u32 cpu, __s64 delta)
{
	__s64 *load = bpf_map_lookup_elem(&dsp_load, &cpu);

	if (!load)
		return;
	/* userspace recounts each interval: never below zero meanwhile */
	if (delta < 0 && *load <= 0)
		return;
	__sync_fetch_and_add(load, delta);
}

/* The active CPU with the fewest live flows (the first on a tie). */
static __always_inline __u32 least_loaded(const struct vz_dsp_config *cfg)
{
	__u32 i, cpu, best = active_cpu(cfg, 0);
	__s64 best_load = 0x7fffffffffffffffll, *load;

	for (i = 0; i < VZ_DSP_MAX_CPUS; i++) {
		if (i >= cfg->nactive)
			break;
		cpu = active_cpu(cfg, i);
		load = bpf_map_lookup_elem(&dsp_load, &cpu);
		if (load && *load < best_load) {
			best_load = *load;
			best = cpu;
		}
	}
	return best;
}

static __always_inline __u32 flow_affinity(const struct vz_dsp_config *cfg,
					   const struct vz_dsp_flow_key *key)
{
	struct vz_dsp_flow *flow, fresh = {};
	__u64 now = bpf_ktime_get_ns(), idle;
	__u32 cpu;

	flow = bpf_map_lookup_elem(&dsp_flows, key);
	if (flow) {
		cpu = flow->cpu;
		idle = now > flow->last_seen ? now - flow->last_seen : 0;
		if (idle > cfg->aging_ns) {
			/* forgotten: placed as a new flow */
			load_add(cpu, -1);
			count(VZ_DSP_FLOWS_AGED);
			cpu = least_loaded(cfg);
			load_add(cpu, 1);
			count(VZ_DSP_FLOWS_NEW);
		} else if (!is_active(cfg, cpu) && idle >= cfg->drain_ns) {
			/* its CPU left the active set and none of its frames
			 * can still be queued there: move it now */
			load_add(cpu, -1);
			cpu = least_loaded(cfg);
			load_add(cpu, 1);
			count(VZ_DSP_FLOWS_MOVED);
		}
		/* else: its CPU, active, or inactive and the flow busy */
		flow->cpu = cpu;
		flow->last_seen = now;
		return cpu;
	}
	cpu = least_loaded(cfg);
	fresh.cpu = cpu;
	fresh.last_seen = now;
	if (!bpf_map_update_elem(&dsp_flows, key, &fresh, BPF_ANY))
		load_add(cpu, 1);
	count(VZ_DSP_FLOWS_NEW);
	return cpu;
}

static __always_inline __u32 buckets(const struct vz_dsp_config *cfg,
				     __u32 hash)
{
	__u32 b = hash & (VZ_DSP_BUCKETS - 1);
	__u32 *cpu = bpf_map_lookup_elem(&dsp_bkt_cpu, &b);
	__u32 *next = bpf_map_lookup_elem(&dsp_bkt_next, &b);
	__u64 *seen = bpf_map_lookup_elem(&dsp_bkt_seen, &b);
	__u64 *pkts = bpf_map_lookup_elem(&dsp_bkt_pkts, &b);
	__u64 now = bpf_ktime_get_ns();

	if (!cpu || !next || !seen || !pkts)
		return active_cpu(cfg, 0);
	/* a bucket moves once none of its frames can still be queued */
	if (*next != *cpu &&
	    (now < *seen || now - *seen >= cfg->drain_ns || !*seen)) {
		*cpu = *next;
		count(VZ_DSP_BUCKETS_MOVED);
	}
	*seen = now;
	*pkts += 1;
	return *cpu;
}

SEC("xdp.frags")
int vz_xdp_dispatch(struct xdp_md *ctx)
{
	struct vz_dsp_flow_key key = {};
	__u8 in[HASH_INPUT_MAX] = {};
	struct vz_dsp_config *cfg;
	__u32 zero = 0, hash, cpu, len;
	__u64 *pkts;
	long ret;

	cfg = bpf_map_lookup_elem(&dsp_config, &zero);
	if (!cfg || !cfg->nactive)
		return XDP_PASS; /* never: configured before attaching */
	len = parse(ctx, &key, in);
	hash = toeplitz(in, len);
	switch (cfg->policy) {
	case VZ_DSP_FLOW_AFFINITY:
		cpu = flow_affinity(cfg, &key);
		break;
	case VZ_DSP_BUCKETS_POLICY:
		cpu = buckets(cfg, hash);
		break;
	default:
		cpu = active_cpu(cfg, hash % cfg->nactive);
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
