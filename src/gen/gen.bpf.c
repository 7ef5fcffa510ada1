// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The generator's XDP program, run by BPF_PROG_RUN in live-frames mode: the
 * kernel feeds it the template frame over and over and transmits what it
 * returns XDP_TX for, out of the interface named in the run's context. Per
 * frame it writes the template's headers afresh (a recycled page may hold
 * what a kernel receiver made of the last frame), sets the UDP or TCP source
 * port (one of `flows`), writes a sequence number and the transmit time into
 * the payload, so a sink can find loss, reordering and latency, and updates
 * the L4 checksum for them.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "gen/gen.h"

struct vz_gen_config vz_gen_config SEC(".data.vz_gen") = { .flows = 1 };

/*
 * Frames made, per transmit thread (gen.h): a thread runs this program for
 * its frames one at a time, so its slot needs no atomic, and a thread that
 * moves to another CPU keeps counting where it was.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct vz_gen_seq_slot);
	__uint(max_entries, VZ_GEN_MAX_THREADS);
} vz_gen_seq SEC(".maps");

/* The sending thread, from the metadata its driver put before the frame. */
static __always_inline __u32 thread_of(struct xdp_md *xdp, void *data)
{
	struct vz_gen_meta *meta = (void *)(long)xdp->data_meta;

	if ((void *)(meta + 1) > data)
		return 0;
	return meta->thread;
}

/* The template's headers, in one of the four constant lengths (gen.h). */
static __always_inline int write_headers(void *data, void *data_end)
{
	switch (vz_gen_config.payload_off) {
	case VZ_GEN_HDR_V4_UDP:
		if (data + VZ_GEN_HDR_V4_UDP > data_end)
			return -1;
		__builtin_memcpy(data, vz_gen_config.headers,
				 VZ_GEN_HDR_V4_UDP);
		return 0;
	case VZ_GEN_HDR_V4_TCP:
		if (data + VZ_GEN_HDR_V4_TCP > data_end)
			return -1;
		__builtin_memcpy(data, vz_gen_config.headers,
				 VZ_GEN_HDR_V4_TCP);
		return 0;
	case VZ_GEN_HDR_V6_UDP:
		if (data + VZ_GEN_HDR_V6_UDP > data_end)
			return -1;
		__builtin_memcpy(data, vz_gen_config.headers,
				 VZ_GEN_HDR_V6_UDP);
		return 0;
	case VZ_GEN_HDR_V6_TCP:
		if (data + VZ_GEN_HDR_V6_TCP > data_end)
			return -1;
		__builtin_memcpy(data, vz_gen_config.headers,
				 VZ_GEN_HDR_V6_TCP);
		return 0;
	}
	return -1;
}

/*
 * The frame's transmit time: on a VM a clock read is a large share of a
 * frame's send and receive (docs/results/2026-11-25-generator-ceiling.md,
 * --batch-stamp), so with stamp_every one read serves a kernel batch
 * (gen.h).
 */
static __always_inline __u64 stamp(struct vz_gen_seq_slot *slot)
{
	if (!vz_gen_config.stamp_every)
		return bpf_ktime_get_ns();
	if (!slot->stamp_left) {
		slot->stamp = bpf_ktime_get_ns();
		slot->stamp_left = vz_gen_config.stamp_every;
	}
	slot->stamp_left--;
	return slot->stamp;
}

SEC("xdp")
int vz_xdp_gen(struct xdp_md *xdp)
{
	void *data = (void *)(long)xdp->data;
	void *data_end = (void *)(long)xdp->data_end;
	__u32 thread, flow, old_dst = 0, new_dst = 0;
	struct vz_gen_seq_slot *slot;
	__u16 *sport, *words, *csum;
	__u64 seq;

	/*
	 * The program also sits on lo for the run (see gen.c): everything
	 * that really arrives there passes untouched.
	 */
	if (xdp->ingress_ifindex != vz_gen_config.ifindex)
		return XDP_PASS;
	if (vz_gen_config.fixed)
		return write_headers(data, data_end) ? XDP_ABORTED : XDP_TX;
	thread = thread_of(xdp, data);
	slot = bpf_map_lookup_elem(&vz_gen_seq, &thread);
	if (!slot || write_headers(data, data_end))
		return XDP_ABORTED;
	seq = slot->made * (vz_gen_config.threads ?: 1) + thread;
	slot->made++;
	/* offsets masked so the verifier can bound them; gen.c checks them */
	sport = data + (vz_gen_config.l4_off & 127);
	words = data + (vz_gen_config.payload_off & 127);
	if ((void *)(sport + 1) > data_end ||
	    (void *)words + sizeof(struct vz_gen_payload) > data_end)
		return XDP_ABORTED;
	/* one flow, the default, needs no 64-bit division a frame */
	flow = vz_gen_config.flows > 1 ? (__u32)(seq % vz_gen_config.flows) : 0;
	*sport = bpf_htons((__u16)(vz_gen_config.base_port + flow));
	((struct vz_gen_payload *)words)->seq = seq + vz_gen_config.seq_base;
	((struct vz_gen_payload *)words)->tx_ns = stamp(slot);
	if (vz_gen_config.dsts > 1) {
		/* the IPv4 header follows Ethernet (gen.c allows no other) */
		struct iphdr *ip = data + ETH_HLEN;

		if ((void *)(ip + 1) > data_end)
			return XDP_ABORTED;
		old_dst = ip->daddr;
		new_dst = bpf_htonl(vz_gen_dst(
			vz_gen_config.dst_base, vz_gen_config.dst_mask,
			(__u32)(seq % vz_gen_config.dsts)));
		ip->daddr = new_dst;
		vz_csum_replace4(&ip->check, old_dst, new_dst);
	}
	if (!vz_gen_config.csum_off)
		return XDP_TX; /* UDP over IPv4: checksum 0, none */
	csum = data + (vz_gen_config.csum_off & 127);
	if ((void *)(csum + 1) > data_end)
		return XDP_ABORTED;
	*csum = vz_gen_stamped_csum(*csum, *sport, words);
	if (old_dst != new_dst) /* TCP: the pseudo-header holds it too */
		vz_csum_replace4(csum, old_dst, new_dst);
	return XDP_TX;
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
