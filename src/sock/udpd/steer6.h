/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef VZ_SOCK_UDPD_STEER6_H
#define VZ_SOCK_UDPD_STEER6_H

#include <linux/types.h>

/* Hand the steering program attached to ifname udpd's IPv6 address (its
 * frames and its solicited-node group's come to udpd from then on).
 * 0, or a negative errno with a message printed. */
int vz_udpd_steer6(const char *ifname, const __u8 ip6[16]);

#endif
