// SPDX-License-Identifier: BSD-2-Clause
#include <string.h>

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

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86dd
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88a8

static __u16 be16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

/*
 * The hash input of the IP header at p + off: its addresses in input,
 * their length in *addrs, and the L4 protocol and offset. -1 if there is
 * no IP header to hash, 1 if only the addresses are hashed (a later
 * fragment carries no ports: hashed like the first), else 0.
 */
static inline int l3_input(const __u8 *p, size_t len, size_t off, __u16 proto,
			   __u8 *input, size_t *addrs, __u8 *next, size_t *l4)
{
	if (proto == ETH_P_IP) {
		if (len < off + 20 || (p[off] >> 4) != 4 || (p[off] & 15) < 5)
			return -1;
		memcpy(input, p + off + 12, 8);
		*addrs = 8;
		*next = p[off + 9];
		*l4 = off + (size_t)(p[off] & 15) * 4;
		return be16(p + off + 6) & 0x3fff ? 1 : 0;
	}
	if (proto == ETH_P_IPV6) {
		if (len < off + 40 || (p[off] >> 4) != 6)
			return -1;
		memcpy(input, p + off + 8, 32);
		*addrs = 32;
		*next = p[off + 6];
		*l4 = off + 40; /* extension headers: addresses only (below) */
		return 0;
	}
	return -1;
}

__u32 vz_rss_hash_frame(const void *frame, size_t len)
{
	const __u8 *p = frame;
	__u8 input[36];
	size_t off = ETH_HLEN, addrs, l4;
	__u16 proto;
	__u8 next;
	int ret;

	if (len < ETH_HLEN)
		return 0;
	proto = be16(p + 12);
	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
		if (len < ETH_HLEN + 4)
			return 0;
		proto = be16(p + 16);
		off += 4;
	}
	ret = l3_input(p, len, off, proto, input, &addrs, &next, &l4);
	if (ret < 0)
		return 0;
	if (!ret && (next == 6 || next == 17) && len >= l4 + 4) {
		memcpy(input + addrs, p + l4, 4);
		return rss_hash(input, addrs + 4);
	}
	return rss_hash(input, addrs);
}
