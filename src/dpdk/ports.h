/* SPDX-License-Identifier: BSD-2-Clause */
/* The dpdk backend's ports and their mempools (ports.c). */
#ifndef VZ_DPDK_PORTS_H
#define VZ_DPDK_PORTS_H

#include "runner/userspace.h"

struct dpdk;

/* Mempool sizes, and the memory EAL must find for them. */
int dpdk_plan_memory(struct vz_us_run *run, struct dpdk *d);
/* Find port p, give it its mempools and queues: 0 or -errno, said. */
int dpdk_setup_port(struct vz_us_run *run, struct dpdk *d, int p);
/* net_af_packet: keep the kernel stack from receiving port p's frames. */
void dpdk_shield(struct vz_us_run *run, struct dpdk *d, int p);
/* net_af_xdp's sockets: "copy", "zero-copy", "mixed ..." or "unknown". */
const char *dpdk_xsk_mode(void);
/* Keep packet sockets from receiving what their interface sends. */
int dpdk_skip_outgoing(void);

#endif
