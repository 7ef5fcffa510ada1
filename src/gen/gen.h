/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Shared by the generator's XDP program and its userspace driver. */
#ifndef VZ_GEN_H
#define VZ_GEN_H

#include <linux/types.h>

#include <veloz/csum.h>

/*
 * Templates: Ethernet + IPv4 (no options) or IPv6 + UDP or TCP (no
 * options), then the payload. The headers' length is one of four.
 */
#define VZ_GEN_HDR_V4_UDP (14 + 20 + 8)
#define VZ_GEN_HDR_V4_TCP (14 + 20 + 20)
#define VZ_GEN_HDR_V6_UDP (14 + 40 + 8)
#define VZ_GEN_HDR_V6_TCP (14 + 40 + 20)
#define VZ_GEN_MAX_HDR VZ_GEN_HDR_V6_TCP
#define VZ_GEN_MIN_SIZE 60 /* without FCS; headers and payload must fit */
#define VZ_GEN_MAX_SIZE 3520 /* what a live frame's page holds */

struct vz_gen_config {
	__u32 ifindex; /* frames are generated only for this one */
	__u32 flows; /* UDP source ports base_port .. +flows-1 */
	__u32 base_port;
	/*
	 * Transmit threads (1 = one). Thread t numbers its frames t,
	 * t + threads, t + 2 * threads, ...: together the frames of every
	 * thread are numbered 0, 1, 2, ... without a gap or a repeat.
	 */
	__u32 threads;
	__u64 seq_base; /* so several runs do not repeat numbers */
	__u16 l4_off; /* the UDP or TCP header */
	__u16 payload_off; /* = the headers' length */
	/*
	 * Offset of the L4 checksum, 0 for none (UDP over IPv4). The template's
	 * checksum is computed with the source port, sequence number and
	 * timestamp zero; per frame their 16-bit words are added to it.
	 */
	__u16 csum_off;
	/*
	 * 1: every frame is the template as built (source port base_port,
	 * sequence number and timestamp 0): only the headers are written
	 * afresh. For receivers that only count, at the least cost a frame.
	 */
	__u16 fixed;
	/*
	 * Destinations (IPv4, live frames): frame k goes to destination
	 * k mod dsts, dst_base + (i * 2654435761 & dst_mask) for the i-th, a
	 * spread over the range dst_base/(32 - log2(dst_mask + 1)) that is a
	 * bijection, so the dsts addresses are distinct. dsts 1: the
	 * template's.
	 */
	__u32 dsts;
	__u32 dst_base; /* host order */
	__u32 dst_mask;
	/*
	 * 0: each frame's timestamp is its own clock read. N: one read per N
	 * frames of a thread (vz-gen --batch-stamp: N is the kernel's batch,
	 * whose frames leave together at its flush), the rest carry it too.
	 * The driver starts each of its calls on a fresh read (stamp_left 0),
	 * so the reads fall on the kernel's batches.
	 */
	__u32 stamp_every;
	/*
	 * The template's headers, written into every frame: live frames come
	 * from a page pool whose pages return after whoever received them
	 * is done, and a receiver in the kernel may have rewritten them in
	 * place (IP forwarding sets new MACs and lowers the TTL).
	 */
	__u8 headers[VZ_GEN_MAX_HDR + 6]; /* padded to 8 bytes */
} __attribute__((aligned(8)));

/*
 * Transmit threads at most, and how a thread is told apart: each hands the
 * kernel its index as the frame's XDP metadata (struct vz_gen_meta, before
 * the template), which live frames keep in every page of the run. vz-gen
 * always gives it; a frame without it counts as thread 0's.
 */
#define VZ_GEN_MAX_THREADS 64

struct vz_gen_meta {
	__u32 thread;
};

/*
 * A thread's count of frames made, alone on its cache line: each thread
 * writes only its own, and two on one line would bounce it between the
 * threads' cores at every frame.
 */
struct vz_gen_seq_slot {
	__u64 made;
	__u64 stamp; /* the last clock read (stamp_every > 0) */
	__u32 stamp_left; /* frames it still stamps */
	__u32 pad0;
	__u64 pad[5];
};

struct vz_gen_payload {
	__u64 seq;
	__u64 tx_ns; /* CLOCK_MONOTONIC at transmit */
} __attribute__((packed));

/*
 * The L4 checksum of a frame whose template checksum was computed with the
 * source port, sequence number and timestamp zero, once they are written:
 * their 16-bit words, as they lie in memory, added to it (one's complement
 * sums do not care about byte order, RFC 1071). 0 becomes 0xffff, since a
 * zero UDP checksum means none. The generator's XDP program and its AF_XDP
 * path both use it, so their frames are the same.
 */
static inline __attribute__((always_inline)) __u16
vz_gen_stamped_csum(__u16 template_csum, __u16 sport, const __u16 *payload)
{
	__u32 sum = (__u16)~template_csum;
	__u16 csum;
	int i;

	sum += sport;
	for (i = 0; i < (int)(sizeof(struct vz_gen_payload) / 2); i++)
		sum += payload[i];
	csum = vz_csum_fold(sum);
	return csum ? csum : 0xffff;
}

/* The i-th destination of a spread (see struct vz_gen_config), host order. */
static inline __attribute__((always_inline)) __u32
vz_gen_dst(__u32 base, __u32 mask, __u32 i)
{
	return base + ((i * 2654435761u) & mask);
}

#endif
