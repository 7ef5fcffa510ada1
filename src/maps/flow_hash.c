// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-lbhash: nf/lb.c's flow hash for the Python control plane, which
 * calls it through ctypes (python/veloz/control/lb.py flow_hash()) to tell
 * which ring slot, hence which backend, a flow takes. The hash itself is
 * include/veloz/jhash.h, the code the NF runs.
 */
#include <string.h>

#include <veloz/jhash.h>

__u32 vz_lb_flow_hash_bytes(const void *flow, size_t len);

/* len must be sizeof(struct vz_lb_flow); anything else hashes nothing: 0. */
__u32 vz_lb_flow_hash_bytes(const void *flow, size_t len)
{
	__u32 words[VZ_LB_FLOW_WORDS];

	if (!flow || len != sizeof(words))
		return 0;
	/* a copy: the caller's bytes need not be 4-byte aligned */
	memcpy(words, flow, sizeof(words));
	return vz_lb_flow_hash(words);
}
