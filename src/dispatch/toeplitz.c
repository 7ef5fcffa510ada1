// SPDX-License-Identifier: BSD-2-Clause
#include "dispatch/flow_tuple.h"
#include "dispatch/toeplitz.h"

const __u8 vz_rss_key[VZ_RSS_KEY_LEN] = VZ_RSS_KEY;

/* policy.h's, the XDP stage's own: one Toeplitz for both builds. */
__u32 vz_toeplitz(const __u8 key[VZ_RSS_KEY_LEN], const __u8 *input, size_t len)
{
	return vz_policy_toeplitz(key, input,
				  len < VZ_RSS_INPUT_MAX ? (__u32)len
							 : VZ_RSS_INPUT_MAX);
}

/*
 * The dispatcher hashes every frame: with the key fixed, each input byte's
 * contribution depends only on its position and value, so a table of
 * 36 x 256 words (36 KiB) turns 8 conditional XORs per byte into one load.
 */
static __u32 rss_table[VZ_RSS_KEY_LEN - 4][256];

__attribute__((constructor)) static void rss_table_init(void)
{
	__u8 byte[VZ_RSS_KEY_LEN - 4] = { 0 };
	unsigned int i, v;

	for (i = 0; i < VZ_RSS_KEY_LEN - 4; i++) {
		for (v = 0; v < 256; v++) {
			byte[i] = (__u8)v;
			rss_table[i][v] = vz_toeplitz(vz_rss_key, byte, i + 1);
		}
		byte[i] = 0;
	}
}

static __u32 rss_hash(const __u8 *input, size_t len)
{
	__u32 hash = 0;
	size_t i;

	for (i = 0; i < len; i++)
		hash ^= rss_table[i][input[i]];
	return hash;
}

/* The tuple as the XDP stage reads it (flow_tuple.h): the key is unused. */
__u32 vz_rss_hash_frame(const void *frame, size_t len)
{
	struct vz_ctx ctx = { .data = (__u8 *)frame,
			      .data_end = (__u8 *)frame + len };
	struct vz_dsp_flow_key key;
	__u8 in[VZ_RSS_INPUT_MAX];

	return rss_hash(in, vz_flow_tuple(&ctx, &key, in));
}
