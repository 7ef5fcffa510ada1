// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * policy.h built for BPF, as the XDP stage builds it: a frame carries one
 * recorded decision (struct vz_policy_record), the program replays it and
 * writes what it decided back into the frame, for test_policy_diff.c to
 * compare with what the native build decided.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "dispatch/policy.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct vz_policy_record);
	__uint(max_entries, 1);
} scratch SEC(".maps");

SEC("xdp")
int vz_policy_replay_prog(struct xdp_md *ctx)
{
	struct vz_policy_record *rec;
	__u32 zero = 0;

	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec || bpf_xdp_load_bytes(ctx, 0, rec, sizeof(*rec)))
		return XDP_ABORTED;
	vz_policy_replay(rec);
	if (bpf_xdp_store_bytes(ctx, 0, rec, sizeof(*rec)))
		return XDP_ABORTED;
	return XDP_TX;
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
