/* SPDX-License-Identifier: BSD-2-Clause */
/* Interface counters through the SIOCETHTOOL ioctl (MAC: common/iface.h). */
#ifndef VZ_GEN_IFSTATS_H
#define VZ_GEN_IFSTATS_H

#include <linux/types.h>
#include <stdbool.h>

/* XDP transmit counters, summed over queues (veth: tx_queue_N_xdp_xmit). */
struct vz_if_xmit {
	bool known; /* the driver reports them */
	__u64 xmit;
	__u64 errors;
};

int vz_if_xmit_read(const char *ifname, struct vz_if_xmit *out);

#endif
