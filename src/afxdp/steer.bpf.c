// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The AF_XDP backend's only kernel part: frames of the receive queues that
 * have a veloz socket go to it; frames of any other queue stay with the
 * kernel. One copy of this program per port, each with its own socket map,
 * keyed by receive queue. DPDK's net_af_xdp loads it too (xdp_prog=), which
 * needs the map to be called xsks_map.
 *
 * Its name starts with vz_xdp_, so a copy left behind by a killed run is
 * recognised as veloz's and removed with --replace.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} xsks_map SEC(".maps");

SEC("xdp")
int vz_xdp_xsk(struct xdp_md *ctx)
{
	return (int)bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
