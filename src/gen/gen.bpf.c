// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The generator's XDP program, run by BPF_PROG_RUN in live-frames mode: the
 * kernel feeds it the template frame over and over and transmits what it
 * returns XDP_TX for, out of the interface named in the run's context. Per
 * frame it writes the template's headers afresh (a recycled page may hold
 * what a kernel receiver made of the last frame), sets the UDP source port
 * (one of `flows`) and writes a sequence number into the payload, so a sink
 * can find loss and reordering.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "gen/gen.h"

struct vz_gen_config vz_gen_config SEC(".data.vz_gen") = { .flows = 1 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} vz_gen_seq SEC(".maps");

SEC("xdp")
int vz_xdp_gen(struct xdp_md *xdp)
{
	void *data = (void *)(long)xdp->data;
	void *data_end = (void *)(long)xdp->data_end;
	struct vz_gen_payload *payload;
	struct udphdr *udp;
	__u32 key = 0, flow;
	__u64 *seq;

	/*
	 * The program also sits on lo for the run (see gen.c): everything
	 * that really arrives there passes untouched.
	 */
	if (xdp->ingress_ifindex != vz_gen_config.ifindex)
		return XDP_PASS;
	seq = bpf_map_lookup_elem(&vz_gen_seq, &key);
	udp = data + VZ_GEN_UDP_OFF;
	payload = data + VZ_GEN_PAYLOAD_OFF;
	if (!seq || (void *)(payload + 1) > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, vz_gen_config.headers, VZ_GEN_PAYLOAD_OFF);
	flow = vz_gen_config.flows ? (__u32)(*seq % vz_gen_config.flows) : 0;
	/* UDP checksum is 0 (none, allowed over IPv4): no update needed. */
	udp->source = bpf_htons((__u16)(vz_gen_config.base_port + flow));
	payload->seq = *seq + vz_gen_config.seq_base;
	payload->tx_ns = bpf_ktime_get_ns();
	(*seq)++;
	return XDP_TX;
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
