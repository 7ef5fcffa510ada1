/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Bob Jenkins' lookup3 hash, as the kernel's jhash2() (include/linux/jhash.h),
 * and the load balancer's flow hash built on it. One copy: nf/lb.c uses it
 * in both builds, and src/maps/flow_hash.c exports it to Python
 * (python/veloz/control/lb.py calls it through ctypes), so the ring slot the
 * control plane predicts is the one the NF picks.
 */
#ifndef VELOZ_JHASH_H
#define VELOZ_JHASH_H

#include <linux/types.h>
#include <veloz/abi.h>

#define VZ_JHASH_INITVAL 0xdeadbeefu

static inline __attribute__((always_inline)) __u32 vz_rol32(__u32 x, int k)
{
	return (x << k) | (x >> (32 - k));
}

#define VZ_JHASH_MIX(a, b, c)         \
	do {                          \
		a -= c;               \
		a ^= vz_rol32(c, 4);  \
		c += b;               \
		b -= a;               \
		b ^= vz_rol32(a, 6);  \
		a += c;               \
		c -= b;               \
		c ^= vz_rol32(b, 8);  \
		b += a;               \
		a -= c;               \
		a ^= vz_rol32(c, 16); \
		c += b;               \
		b -= a;               \
		b ^= vz_rol32(a, 19); \
		a += c;               \
		c -= b;               \
		c ^= vz_rol32(b, 4);  \
		b += a;               \
	} while (0)

#define VZ_JHASH_FINAL(a, b, c)       \
	do {                          \
		c ^= b;               \
		c -= vz_rol32(b, 14); \
		a ^= c;               \
		a -= vz_rol32(c, 11); \
		b ^= a;               \
		b -= vz_rol32(a, 25); \
		c ^= b;               \
		c -= vz_rol32(b, 16); \
		a ^= c;               \
		a -= vz_rol32(c, 4);  \
		b ^= a;               \
		b -= vz_rol32(a, 14); \
		c ^= b;               \
		c -= vz_rol32(b, 24); \
	} while (0)

/* jhash2(k, length, initval): length is in 32-bit words. */
static inline __attribute__((always_inline)) __u32
vz_jhash2(const __u32 *k, __u32 length, __u32 initval)
{
	__u32 a, b, c;

	a = b = c = VZ_JHASH_INITVAL + (length << 2) + initval;
	while (length > 3) {
		a += k[0];
		b += k[1];
		c += k[2];
		VZ_JHASH_MIX(a, b, c);
		length -= 3;
		k += 3;
	}
	switch (length) {
	case 3:
		c += k[2];
		__attribute__((fallthrough));
	case 2:
		b += k[1];
		__attribute__((fallthrough));
	case 1:
		a += k[0];
		VZ_JHASH_FINAL(a, b, c);
		break;
	}
	return c;
}

/* The words of a struct vz_lb_flow, which the flow hash covers. */
#define VZ_LB_FLOW_WORDS (sizeof(struct vz_lb_flow) / 4)

/* nf/lb.c's flow hash: jhash2 of a vz_lb_flow's words, seeded. */
static inline __attribute__((always_inline)) __u32
vz_lb_flow_hash(const __u32 words[VZ_LB_FLOW_WORDS])
{
	return vz_jhash2(words, VZ_LB_FLOW_WORDS, VZ_LB_HASH_SEED);
}

#endif /* VELOZ_JHASH_H */
