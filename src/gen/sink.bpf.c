// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The sink's XDP program: counts the generator's frames (UDP or TCP to its
 * port, over IPv4 or IPv6) as they arrive and drops them, so receiving costs as
 * little as the kernel allows. From the payload it reads the sequence number,
 * for duplicates (a bitmap) and reordering (a frame behind a higher one),
 * and the transmit timestamp, for one-way latency: generator and sink run
 * on one machine and read the same CLOCK_MONOTONIC, whatever their network
 * namespaces. Every other frame (ARP, ping) passes to the stack untouched.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "gen/gen.h"
#include "gen/sink.h"

const volatile struct vz_sink_config vz_sink_config = { 0 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct vz_sink_stats);
	__uint(max_entries, 1);
} vz_sink_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_SINK_BUCKETS);
} vz_sink_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, VZ_SINK_SEEN_WORDS);
} vz_sink_seen SEC(".maps");

static __always_inline __u32 msb64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r;
}

static __always_inline __u32 bucket(__u64 ns)
{
	__u32 msb;

	if (ns < VZ_SINK_EXACT)
		return (__u32)ns;
	msb = msb64(ns);
	if (msb > VZ_SINK_MAX_MSB)
		return VZ_SINK_BUCKETS - 1;
	return VZ_SINK_EXACT + (msb - 6) * VZ_SINK_SUB +
	       (__u32)((ns >> (msb - VZ_SINK_SUB_BITS)) & (VZ_SINK_SUB - 1));
}

/* Where a generator frame's payload starts (after UDP or TCP), or NULL. */
static __always_inline void *gen_payload(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct tcphdr *tcp;
	struct udphdr *udp;
	__u8 proto;

	if ((void *)(eth + 1) > data_end)
		return NULL;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end || ip->ihl < 5 ||
		    (ip->frag_off & bpf_htons(0x3fff)))
			return NULL;
		/* IPIP from a load balancer: the generator's frame is inside */
		if (ip->protocol == IPPROTO_IPIP) {
			ip = (void *)ip + ip->ihl * 4;
			if ((void *)(ip + 1) > data_end || ip->ihl < 5 ||
			    (ip->frag_off & bpf_htons(0x3fff)))
				return NULL;
		}
		proto = ip->protocol;
		udp = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return NULL;
		proto = ip6->nexthdr;
		udp = (void *)(ip6 + 1);
	} else {
		return NULL;
	}
	/* UDP and TCP both start with the source and destination ports */
	if ((void *)(udp + 1) > data_end ||
	    udp->dest != vz_sink_config.dst_port)
		return NULL;
	if (proto == IPPROTO_UDP)
		return udp + 1;
	if (proto != IPPROTO_TCP)
		return NULL;
	tcp = (void *)udp;
	if ((void *)(tcp + 1) > data_end || tcp->doff < 5)
		return NULL;
	return (void *)tcp + tcp->doff * 4;
}

/* ARP, or an IPv6 frame carrying ICMPv6 right after its fixed header (where
 * NDP is: its messages take no extension headers before ICMPv6). */
static __always_inline bool is_address_resolution(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if ((void *)(eth + 1) > data_end)
		return false;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return true;
	return eth->h_proto == bpf_htons(ETH_P_IPV6) &&
	       (void *)(ip6 + 1) <= data_end && ip6->nexthdr == IPPROTO_ICMPV6;
}

SEC("xdp")
int vz_xdp_sink(struct xdp_md *xdp)
{
	void *data = (void *)(long)xdp->data;
	void *data_end = (void *)(long)xdp->data_end;
	struct vz_gen_payload *payload;
	struct vz_sink_stats *st;
	__u64 now, seq, latency, *word, *count, bit, old;
	__u32 key = 0, b;

	st = bpf_map_lookup_elem(&vz_sink_stats, &key);
	if (!st)
		return XDP_PASS;
	if (vz_sink_config.count_only) {
		/* every frame, unread: the least a receiver can do. Except
		 * address resolution (ARP, and ICMPv6 for NDP), which goes on
		 * to the host: a sender whose neighbour entry expires while
		 * the sink runs must still reach it. */
		if (is_address_resolution(data, data_end))
			return XDP_PASS;
		st->packets++;
		st->bytes += (__u64)(data_end - data);
		return XDP_DROP;
	}
	payload = gen_payload(data, data_end);
	if (!payload || (void *)(payload + 1) > data_end) {
		st->other++;
		return XDP_PASS;
	}
	seq = payload->seq;
	now = bpf_ktime_get_ns();
	st->packets++;
	st->bytes += (__u64)(data_end - data);

	key = (__u32)((seq >> 6) & (VZ_SINK_SEEN_WORDS - 1));
	word = bpf_map_lookup_elem(&vz_sink_seen, &key);
	bit = 1ULL << (seq & 63);
	old = word ? __sync_fetch_and_or(word, bit) : 0;
	if (old & bit) {
		st->duplicates++;
		return XDP_DROP; /* counted once for latency and order */
	}
	if (seq + 1 < st->max_seq_plus1)
		st->reordered++;
	else
		st->max_seq_plus1 = seq + 1;

	if (payload->tx_ns > now) {
		st->future++;
		return XDP_DROP;
	}
	latency = now - payload->tx_ns;
	st->latency_sum_ns += latency;
	if (latency > st->latency_max_ns)
		st->latency_max_ns = latency;
	if (!st->latency_min_ns || latency < st->latency_min_ns)
		st->latency_min_ns = latency;
	b = bucket(latency);
	count = bpf_map_lookup_elem(&vz_sink_hist, &b);
	if (count)
		(*count)++;
	return XDP_DROP;
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
