/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The RSS hash in software, for ports that do not hand one over (AF_XDP
 * copy mode, veth): the Toeplitz hash with Microsoft's default key over
 * (source address, destination address, source port, destination port) in
 * network byte order, as NICs compute it: policy.h's Toeplitz, which
 * src/dispatch/xdp_stage.bpf.c runs too, so a flow lands on the same hash
 * on every backend.
 */
#ifndef VZ_DISPATCH_TOEPLITZ_H
#define VZ_DISPATCH_TOEPLITZ_H

#include <stddef.h>
#include <linux/types.h>

#include "dispatch/policy.h"

extern const __u8 vz_rss_key[VZ_RSS_KEY_LEN];

/* The hash of `len` bytes (at most VZ_RSS_KEY_LEN - 4) under `key`. */
__u32 vz_toeplitz(const __u8 key[VZ_RSS_KEY_LEN], const __u8 *input,
		  size_t len);

/*
 * The RSS hash of a frame: of the tuple the XDP stage reads too
 * (flow_tuple.h): Ethernet (one VLAN tag), IPv4 or IPv6, with the ports of
 * UDP and TCP when not a fragment (fragments and other protocols hash the
 * addresses alone, so all of a datagram stays together). 0 for anything
 * that is not IP or is cut short.
 */
__u32 vz_rss_hash_frame(const void *frame, size_t len);

#endif
