// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The AF_XDP backend's only kernel part: frames of the receive queues that
 * have a veloz socket go to it; frames of any other queue stay with the
 * kernel. One copy of this program per port, each with its own socket map,
 * keyed by receive queue. DPDK's net_af_xdp loads it too (xdp_prog=), which
 * needs the map to be called xsks_map.
 *
 * Its name starts with vz_xdp_, so a copy left behind by a killed run is
 * recognised as veloz's and removed with --replace. Why udpd has a
 * steering program of its own: veloz/xsk_steer.h.
 */
#include <veloz/xsk_steer.h>

SEC("xdp")
int vz_xdp_xsk(struct xdp_md *ctx)
{
	return vz_xsk_redirect(ctx);
}

char vz_license[] SEC("license") = "Dual BSD/GPL";
