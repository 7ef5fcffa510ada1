/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * tests/nf/headroom.c: moves the frame's head by `delta` bytes (negative:
 * grow into the headroom, positive: shrink), writes `delta`'s low byte into
 * the new first byte when it may, and sends the frame back; DROP when the
 * move is refused. A test NF: the differential tier sweeps delta to check
 * that vz_adjust_head() refuses and allows exactly what the kernel does.
 */
#include <veloz/nf.h>

struct headroom_config {
	__s32 delta;
};

VZ_CONFIG(struct headroom_config) = { .delta = -4 };

VZ_NF(headroom)
{
	__u8 *first;

	if (vz_adjust_head(ctx, vz_config.delta))
		return VZ_DROP;
	first = vz_header(ctx, 0, 1);
	if (!first)
		return VZ_ABORTED;
	*first = (__u8)vz_config.delta;
	return VZ_TX;
}
