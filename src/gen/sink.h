/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Shared by the sink's XDP program and its userspace driver. */
#ifndef VZ_SINK_H
#define VZ_SINK_H

#include <linux/types.h>

/*
 * Latency histogram, in the manner of HdrHistogram: exact below 64 ns, then
 * each power of two split into 32 buckets (about 3% relative precision), up
 * to 2^41 ns. Bucket i counts latencies in [vz_sink_bucket_low(i),
 * vz_sink_bucket_low(i + 1)).
 */
#define VZ_SINK_EXACT 64
#define VZ_SINK_SUB_BITS 5
#define VZ_SINK_SUB (1 << VZ_SINK_SUB_BITS)
#define VZ_SINK_MAX_MSB 40
#define VZ_SINK_BUCKETS (VZ_SINK_EXACT + (VZ_SINK_MAX_MSB - 5) * VZ_SINK_SUB)

/* Sequence numbers remembered for duplicate detection: 2^28 (32 MiB). */
#define VZ_SINK_SEEN_BITS 28
#define VZ_SINK_SEEN_WORDS (1u << (VZ_SINK_SEEN_BITS - 6))

struct vz_sink_config {
	__u16 dst_port; /* network order: the generator's frames */
	/* count every frame, unread, and drop it: the cheapest receiver
	 * there is, to measure the generator's own ceiling */
	__u8 count_only;
	__u8 pad[5];
};

/* Per CPU: the sum over CPUs is the sink's count. */
struct vz_sink_stats {
	__u64 packets; /* the generator's frames */
	__u64 bytes;
	__u64 duplicates; /* a sequence number seen before */
	/*
	 * Arrived after a higher sequence number seen on the same CPU: a
	 * receive queue is served by one CPU at a time, so this is the order
	 * of each queue, which is the order a flow keeps.
	 */
	__u64 reordered;
	__u64 max_seq_plus1; /* on this CPU; 0 = none yet */
	__u64 latency_sum_ns;
	__u64 latency_max_ns;
	__u64 latency_min_ns; /* 0 = none yet */
	__u64 future; /* a transmit time ahead of the clock (another clock) */
	__u64 other; /* frames that were not the generator's, passed on */
};

#endif
