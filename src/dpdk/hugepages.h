/* SPDX-License-Identifier: BSD-2-Clause */
/* The dpdk backend's 2 MiB hugepages (hugepages.c). */
#ifndef VZ_DPDK_HUGEPAGES_H
#define VZ_DPDK_HUGEPAGES_H

struct dpdk;

#define HP_SIZE (2ul << 20)

/*
 * Make `need` hugepages available, raising nr_hugepages if short (and
 * first giving back what killed runs had reserved): 0 or -errno, said.
 */
int dpdk_hp_reserve(struct dpdk *d, unsigned long need);
/* Give back what dpdk_hp_reserve() raised the pool by. */
void dpdk_hp_release(struct dpdk *d);

#endif
