/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Internet checksum helpers, plain C: the same code in BPF programs, native
 * NFs and userspace tools (the generator builds its template with them).
 */
#ifndef VELOZ_CSUM_H
#define VELOZ_CSUM_H

#include <linux/types.h>

#ifndef VZ_INLINE
#define VZ_INLINE static inline __attribute__((always_inline))
#endif

/* Fold a 32-bit one's-complement sum to 16 bits and complement it. */
VZ_INLINE __u16 vz_csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/*
 * Incremental update of a checksum field after a 16-bit word of the covered
 * data changed from old to new (RFC 1624, eqn. 3). Words in network order.
 */
VZ_INLINE void vz_csum_replace2(__u16 *check, __u16 old, __u16 new)
{
	__u32 sum = (__u16) ~*check;

	sum += (__u16)~old;
	sum += new;
	*check = vz_csum_fold(sum);
}

VZ_INLINE void vz_csum_replace4(__u16 *check, __u32 old, __u32 new)
{
	__u32 sum = (__u16) ~*check;

	sum += (__u16) ~(old >> 16);
	sum += (__u16) ~(old & 0xffff);
	sum += new >> 16;
	sum += new & 0xffff;
	*check = vz_csum_fold(sum);
}

/* Header checksum of an option-less IPv4 header (its check field as is). */
VZ_INLINE __u16 vz_ipv4_csum(const void *iph)
{
	const __u16 *word = iph;
	__u32 sum = 0;
	int i;

	for (i = 0; i < 10; i++)
		sum += word[i];
	return vz_csum_fold(sum);
}

#endif /* VELOZ_CSUM_H */
