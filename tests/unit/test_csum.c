// SPDX-License-Identifier: BSD-2-Clause
/*
 * The checksum helpers of nf.h: incremental updates (RFC 1624) must give
 * what a full recomputation gives, for every position and many values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <veloz/csum.h>

static int failures;

static __u16 full(const __u16 *words)
{
	__u16 copy[10];

	memcpy(copy, words, sizeof(copy));
	copy[5] = 0; /* the check field of an IPv4 header */
	return vz_ipv4_csum(copy);
}

int main(void)
{
	/* RFC 1071's worked example: 0x4500 0x0073 ... -> check 0xb861 */
	static const __u8 rfc[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40,
				      0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
				      0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };
	__u16 hdr[10], check, old;
	__u32 old32, new32;
	int i, pos;

	memcpy(hdr, rfc, sizeof(hdr));
	check = vz_ipv4_csum(hdr);
	if (((const __u8 *)&check)[0] != 0xb8 ||
	    ((const __u8 *)&check)[1] != 0x61) {
		fprintf(stderr, "RFC 1071 example: got %02x%02x\n",
			((const __u8 *)&check)[0], ((const __u8 *)&check)[1]);
		failures++;
	}
	hdr[5] = check;
	if (vz_ipv4_csum(hdr) != 0) {
		fprintf(stderr, "a header with its checksum must sum to 0\n");
		failures++;
	}
	srand(1);
	for (i = 0; i < 100000; i++) {
		pos = rand() % 10;
		if (pos == 5)
			continue;
		old = hdr[pos];
		hdr[pos] = (__u16)rand();
		vz_csum_replace2(&hdr[5], old, hdr[pos]);
		if (hdr[5] != full(hdr)) {
			fprintf(stderr, "replace2 at word %d diverged\n", pos);
			failures++;
			hdr[5] = full(hdr);
		}
		pos = (rand() % 4) * 2 + (rand() % 2 ? 6 : 0);
		if (pos > 8 || pos == 4)
			continue;
		memcpy(&old32, &hdr[pos], 4);
		new32 = (__u32)rand() * 2654435761u;
		memcpy(&hdr[pos], &new32, 4);
		/* replace4 takes the 32-bit word as the host reads it */
		vz_csum_replace4(&hdr[5], old32, new32);
		if (hdr[5] != full(hdr)) {
			fprintf(stderr, "replace4 at word %d diverged\n", pos);
			failures++;
			hdr[5] = full(hdr);
		}
	}
	if (failures) {
		fprintf(stderr, "%d checksum check(s) failed\n", failures);
		return 1;
	}
	printf("checksums: RFC 1071 example and 100000 incremental updates agree\n");
	return 0;
}
