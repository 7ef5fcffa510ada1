/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What the two AF_XDP steering programs share: the socket map, keyed by
 * receive queue, and the redirect to the socket of the frame's queue
 * (XDP_PASS, to the kernel, where the queue has none). Its name is
 * xsks_map because DPDK's net_af_xdp, which loads src/afxdp/steer.bpf.c,
 * looks it up by that name, and the loaders of both (src/afxdp/afxdp.c,
 * src/sock/port/port.c) do too.
 *
 * Two programs remain because they do two jobs: src/afxdp/steer.bpf.c
 * gives a backend every frame of its queues (the NF decides, so nothing is
 * parsed); src/sock/udpd/udpd_steer.bpf.c shares the port with the host's
 * stack and takes only frames for udpd's own addresses, which it sets in
 * its maps after loading (until then it takes nothing). Merged, the
 * afxdp/DPDK path would pay udpd's parse per frame and depend on a map a
 * DPDK-loaded copy never gets written.
 */
#ifndef VELOZ_XSK_STEER_H
#define VELOZ_XSK_STEER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define VZ_XSK_QUEUES_MAX 64

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, VZ_XSK_QUEUES_MAX);
} xsks_map SEC(".maps");

/* To the AF_XDP socket of the frame's receive queue, or to the kernel. */
static __always_inline int vz_xsk_redirect(struct xdp_md *xdp)
{
	return (int)bpf_redirect_map(&xsks_map, xdp->rx_queue_index, XDP_PASS);
}

#endif /* VELOZ_XSK_STEER_H */
